package flame

import (
	"bufio"
	"encoding/json"
	"io"
)

// speedscopeFile is speedscope's file format
// (https://www.speedscope.app/file-format-schema.json): frames are shared,
// each sample is a root-first list of frame indexes with a weight.
type speedscopeFile struct {
	Schema             string              `json:"$schema"`
	Shared             speedscopeShared    `json:"shared"`
	Profiles           []speedscopeProfile `json:"profiles"`
	Name               string              `json:"name"`
	ActiveProfileIndex int                 `json:"activeProfileIndex"`
	Exporter           string              `json:"exporter"`
}

type speedscopeShared struct {
	Frames []speedscopeFrame `json:"frames"`
}

type speedscopeFrame struct {
	Name string `json:"name"`
}

type speedscopeProfile struct {
	Type       string    `json:"type"`
	Name       string    `json:"name"`
	Unit       string    `json:"unit"`
	StartValue int64     `json:"startValue"`
	EndValue   int64     `json:"endValue"`
	Samples    [][]int32 `json:"samples"`
	Weights    []int64   `json:"weights"`
}

// speedscopeUnit maps our units onto speedscope's value units.
func speedscopeUnit(u Unit) string {
	switch u {
	case Nanoseconds:
		return "nanoseconds"
	case Microseconds:
		return "microseconds"
	case Bytes:
		return "bytes"
	}
	return "none"
}

// WriteSpeedscope writes p in speedscope's JSON format as one sampled
// profile, one sample per distinct stack weighted by its value.
func WriteSpeedscope(w io.Writer, p *Profile, o Options) error {
	title := o.Title
	if title == "" {
		title = "perfscope"
	}
	f := speedscopeFile{
		Schema:   "https://www.speedscope.app/file-format-schema.json",
		Name:     title,
		Exporter: "perfscope",
	}
	// Frame indexes are the interned name ids without the root "all".
	f.Shared.Frames = make([]speedscopeFrame, len(p.names)-1)
	for i, n := range p.names[1:] {
		f.Shared.Frames[i] = speedscopeFrame{Name: n}
	}
	prof := speedscopeProfile{
		Type: "sampled", Name: title, Unit: speedscopeUnit(p.Unit),
		EndValue: p.Total(), Samples: [][]int32{}, Weights: []int64{},
	}
	var path []int32
	var walk func(n int32)
	walk = func(n int32) {
		if n != 0 {
			path = append(path, int32(p.node(n).name)-1)
			defer func() { path = path[:len(path)-1] }()
			if s := p.node(n).self; s > 0 {
				prof.Samples = append(prof.Samples, append([]int32(nil), path...))
				prof.Weights = append(prof.Weights, s)
			}
		}
		for c := p.node(n).firstChild; c != noNode; c = p.node(c).nextSibling {
			walk(c)
		}
	}
	walk(0)
	f.Profiles = []speedscopeProfile{prof}
	bw := bufio.NewWriter(w)
	if err := json.NewEncoder(bw).Encode(f); err != nil {
		return err
	}
	return bw.Flush()
}
