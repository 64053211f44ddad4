package golang

import (
	"fmt"
	"regexp"
	"strconv"
)

// Version is a Go release (go1.22.12: Major 1, Minor 22, Patch 12).
type Version struct {
	Major, Minor, Patch int
}

func (v Version) String() string { return fmt.Sprintf("go%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Less orders releases.
func (v Version) Less(o Version) bool {
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	if v.Minor != o.Minor {
		return v.Minor < o.Minor
	}
	return v.Patch < o.Patch
}

// goVersion matches the build info's toolchain: "go1.22.12", "go1.21rc2",
// "go1.23.4 X:boringcrypto", "go1.20" (the first release of 1.20).
var goVersion = regexp.MustCompile(`^go(\d+)\.(\d+)(?:\.(\d+))?((?:rc|beta)\d+)?(?:[ -].*)?$`)

// ParseVersion reads the build info's Go version. A development toolchain
// ("devel go1.24-abc123") is not a release and has no known layout.
func ParseVersion(s string) (Version, error) {
	m := goVersion.FindStringSubmatch(s)
	if m == nil {
		return Version{}, fmt.Errorf("Go version %q is not a release", s)
	}
	var v Version
	v.Major, _ = strconv.Atoi(m[1])
	v.Minor, _ = strconv.Atoi(m[2])
	if m[3] != "" {
		v.Patch, _ = strconv.Atoi(m[3])
	}
	return v, nil
}

// Layout is what the probe needs to know about one range of Go releases:
// the functions it attaches to and the register each argument it reads
// arrives in. Every entry was checked against that release's runtime
// source and tested on binaries it built.
type Layout struct {
	// First and Last are the minor releases of Go 1 the layout holds
	// for, both included.
	First, Last int
	// MallocSizeArg is the position of runtime.mProf_Malloc's size among
	// its integer arguments (the register is the ABI's for that
	// position); MallocSignature the declaration it was read from.
	MallocSizeArg   int
	MallocSignature string
}

// PoolNewOffset is the offset of sync.Pool's New field (after local,
// localSize, victim and victimSize), the same in every supported release.
const PoolNewOffset = 32

// Layouts are the supported releases, oldest first. The register ABI
// (arguments in RAX, RBX, RCX, ...) holds on amd64 since Go 1.17; the
// function table format read here since 1.18; 1.19 is the oldest release
// tested.
var Layouts = []Layout{
	{First: 19, Last: 22, MallocSizeArg: 1, MallocSignature: "func mProf_Malloc(p unsafe.Pointer, size uintptr)"},
	// Go 1.23 passes the M so that the stack is taken into
	// mp.profStack (runtime/mprof.go).
	{First: 23, Last: 26, MallocSizeArg: 2, MallocSignature: "func mProf_Malloc(mp *m, p unsafe.Pointer, size uintptr)"},
}

// LayoutFor is the layout of v on arch, or an error wrapping
// ErrUnsupportedGo that says which releases are supported.
func LayoutFor(v Version, arch string) (Layout, error) {
	first, last := Layouts[0].First, Layouts[len(Layouts)-1].Last
	if arch != "amd64" {
		return Layout{}, fmt.Errorf("%w: a %s binary (perfscope reads the amd64 register ABI only)", ErrUnsupportedGo, arch)
	}
	if v.Major == 1 {
		for _, l := range Layouts {
			if v.Minor >= l.First && v.Minor <= l.Last {
				return l, nil
			}
		}
	}
	return Layout{}, fmt.Errorf("%w: built by %v; perfscope knows the runtime's layout of go1.%d through go1.%d", ErrUnsupportedGo, v, first, last)
}
