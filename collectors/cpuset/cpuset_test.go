package cpuset

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestParseList(t *testing.T) {
	tests := []struct {
		in   string
		want []int
	}{
		{"", []int{}},
		{"\n", []int{}},
		{"0", []int{0}},
		{"0-3,8,10-11\n", []int{0, 1, 2, 3, 8, 10, 11}},
		{"5-9,15-19", []int{5, 6, 7, 8, 9, 15, 16, 17, 18, 19}},
		{"0-7:2/4", []int{0, 1, 4, 5}},
		{"3,1,1", []int{1, 3}},
		{"64,127-128", []int{64, 127, 128}},
	}
	for _, tt := range tests {
		s, err := ParseList(tt.in)
		if err != nil {
			t.Errorf("ParseList(%q): %v", tt.in, err)
			continue
		}
		if got := s.CPUs(); !slices.Equal(got, tt.want) {
			t.Errorf("ParseList(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestParseListRejects(t *testing.T) {
	for _, in := range []string{"a", "1-", "-1", "3-1", "0,,2", "0-99999999", "0-3:2", "0-3:3/2", "1.5"} {
		if s, err := ParseList(in); err == nil {
			t.Errorf("ParseList(%q) accepted: %v", in, s)
		}
	}
}

func TestListRoundTrip(t *testing.T) {
	for _, in := range []string{"", "0", "0-3,8,10-11", "0-4,10-14", "1,3,5", "0-255"} {
		if got := MustParseList(in).List(); got != in {
			t.Errorf("List(ParseList(%q)) = %q", in, got)
		}
	}
}

func TestParseMask(t *testing.T) {
	tests := []struct {
		in   string
		want string // cpulist
	}{
		{"0", ""},
		{"00000000,00000000", ""},
		{"3\n", "0-1"},
		{"0x3", "0-1"},
		{"10040", "6,16"},             // Makita (LinuxCon Japan 2016): rx-6 → CPUs 6 and 16
		{"80200", "9,19"},             // Makita (LinuxCon Japan 2016): rx-9
		{"00000000,00010040", "6,16"}, // kernel's own form of the same mask
		{"000000ff,ffffffff", "0-39"},
		{"1,00000000", "32"},
		{"100000000", "32"}, // one long number, cut into words from the right
		{"80000000,00000000,00000001", "0,95"},
	}
	for _, tt := range tests {
		s, err := ParseMask(tt.in)
		if err != nil {
			t.Errorf("ParseMask(%q): %v", tt.in, err)
			continue
		}
		if got := s.List(); got != tt.want {
			t.Errorf("ParseMask(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for _, in := range []string{"", "g", "0,,1", "123456789,0", "0x"} {
		if s, err := ParseMask(in); err == nil {
			t.Errorf("ParseMask(%q) accepted: %v", in, s)
		}
	}
}

func TestMaskFormat(t *testing.T) {
	tests := []struct {
		cpus   string
		nrCPUs int
		want   string
	}{
		{"0-1", 2, "3"},       // as /proc/irq/N/smp_affinity prints on 2 CPUs
		{"", 2, "0"},          // RPS off
		{"", 0, "0"},          // no width known
		{"6,16", 20, "10040"}, // Makita's echo 10040 > rps_cpus
		{"6,16", 40, "00,00010040"},
		{"0-39", 40, "ff,ffffffff"},
		{"6,16", 64, "00000000,00010040"},
		{"32", 0, "1,00000000"},
		{"70", 8, "40,00000000,00000000"}, // nrCPUs too small: widened to hold the set
	}
	for _, tt := range tests {
		s := MustParseList(tt.cpus)
		got := s.Mask(tt.nrCPUs)
		if got != tt.want {
			t.Errorf("Mask(%q, %d) = %q, want %q", tt.cpus, tt.nrCPUs, got, tt.want)
		}
		back, err := ParseMask(got)
		if err != nil || !back.Equal(s) {
			t.Errorf("ParseMask(Mask(%q)) = %v, %v", tt.cpus, back, err)
		}
	}
}

func TestSetOperations(t *testing.T) {
	a, b := MustParseList("0-3"), MustParseList("2-5,64")
	if got := a.Union(b).List(); got != "0-5,64" {
		t.Errorf("union = %s", got)
	}
	if got := a.Intersect(b).List(); got != "2-3" {
		t.Errorf("intersect = %s", got)
	}
	if got := b.Difference(a).List(); got != "4-5,64" {
		t.Errorf("difference = %s", got)
	}
	if got := b.Difference(b); !got.IsEmpty() || !got.Equal(Set{}) {
		t.Errorf("b−b = %v, want empty and equal to the zero Set", got)
	}
	if !MustParseList("2").IsSubset(a) || b.IsSubset(a) {
		t.Error("IsSubset")
	}
	if b.Max() != 64 || (Set{}).Max() != -1 || b.Len() != 5 || !b.Contains(64) || b.Contains(63) || b.Contains(-1) {
		t.Errorf("Max/Len/Contains on %v", b)
	}
	if !Of(3, 1).Equal(MustParseList("1,3")) || !Range(1, 3).Equal(MustParseList("1-3")) {
		t.Error("Of/Range")
	}
}

func TestSetJSON(t *testing.T) {
	type wrapper struct {
		CPUs Set `json:"cpus"`
	}
	b, err := json.Marshal(wrapper{MustParseList("0-3,8")})
	if err != nil || string(b) != `{"cpus":"0-3,8"}` {
		t.Fatalf("marshal = %s, %v", b, err)
	}
	var w wrapper
	if err := json.Unmarshal(b, &w); err != nil || w.CPUs.List() != "0-3,8" {
		t.Fatalf("unmarshal = %v, %v", w.CPUs, err)
	}
	if err := json.Unmarshal([]byte(`{"cpus":[1,2]}`), &w); err == nil {
		t.Error("accepted an array")
	}
}
