package recipes

import (
	"strconv"
	"strings"
	"time"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/measure"
)

// JVMFlags are `perfscope jvm`'s flags that are the jvm-alloc recipe's
// parameters.
type JVMFlags struct {
	PID      int
	Duration time.Duration
	Requests int64
	LoadFlags
	Event, AllocInterval          string
	AsyncProfiler                 string
	TargetRPS                     float64
	TargetGCInterval              time.Duration
	Top                           int
	RequestsFrom, RequestsMetric  string
	RequestsMatch                 []string
	Mappings, Count               string
	HTTPPorts                     []uint
	RequestThreads, HandlerFrames string
	OffCPU                        bool
}

// jvmFlagNames name the jvm-alloc recipe's parameters that are not
// --name-with-dashes as the jvm command's flags.
var jvmFlagNames = map[string]string{"body_file": "--body @FILE"}

// BindJVM binds the jvm-alloc recipe to `perfscope jvm`'s flags: the
// recipe checks their values and how they go together, in sentences
// naming the flags. --alloc-interval auto is the recipe's 0, an interval
// chosen from the allocation rate.
func BindJVM(f JVMFlags) (*Plan, error) {
	allocInterval := f.AllocInterval
	if strings.EqualFold(strings.TrimSpace(allocInterval), "auto") {
		allocInterval = "0"
	}
	set := map[string]string{"pid": strconv.Itoa(f.PID), "duration": f.Duration.String(), "requests": strconv.FormatInt(f.Requests, 10),
		"load": f.LoadURL, "method": strings.ToUpper(f.Method), "concurrency": strconv.Itoa(f.Concurrency), "event": f.Event,
		"alloc_interval": allocInterval, "async_profiler": f.AsyncProfiler, "target_rps": strconv.FormatFloat(f.TargetRPS, 'g', -1, 64),
		"target_gc_interval": f.TargetGCInterval.String(), "top": strconv.Itoa(f.Top),
		"requests_from": f.RequestsFrom, "requests_metric": f.RequestsMetric, "requests_match": KindList.JoinItems(f.RequestsMatch),
		"mappings": f.Mappings, "count": f.Count, "request_threads": f.RequestThreads, "handler_frames": f.HandlerFrames,
		"off_cpu": strconv.FormatBool(f.OffCPU)}
	if file, ok := strings.CutPrefix(f.Body, "@"); ok {
		set["body_file"] = file
	} else {
		set["body"] = f.Body
	}
	if err := httpload.CheckHeaders(f.Headers); err != nil {
		return nil, measure.MarkBadInput(err)
	}
	set["header"] = KindList.JoinItems(f.Headers)
	set["http_port"] = portsParam(f.HTTPPorts)
	r, err := Find("jvm-alloc")
	if err != nil {
		return nil, err
	}
	return r.BindFlags(set, jvmFlagNames)
}

// portsParam is --http-port as a ports parameter.
func portsParam(ports []uint) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.FormatUint(uint64(p), 10)
	}
	return KindPorts.JoinItems(s)
}
