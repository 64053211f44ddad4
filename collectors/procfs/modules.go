package procfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// ErrNoModules is returned when the kernel has no loadable modules (it was
// built without CONFIG_MODULES, so /proc/modules does not exist): every
// module is built in or absent.
var ErrNoModules = errors.New("this kernel has no loadable modules (no /proc/modules)")

// Modules are the loaded modules by name with their use counts, as
// /proc/modules lists them. Built-in modules are not listed.
type Modules map[string]int

// Modules reads /proc/modules.
func (fs FS) Modules() (Modules, error) {
	f, err := fs.Open("/proc/modules")
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoModules
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseModules(f)
}

// parseModules reads lines of "name size refcount users state address".
// A line it cannot read is an error: a module missing from the list would
// read as "not loaded", and unloading or judging by that is wrong.
func parseModules(r io.Reader) (Modules, error) {
	out := Modules{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 3 {
			return nil, fmt.Errorf("/proc/modules line %d: want name, size and use count, got %q", n, sc.Text())
		}
		refs, err := strconv.Atoi(f[2])
		if err != nil {
			return nil, fmt.Errorf("/proc/modules line %d: use count %q is not a number", n, f[2])
		}
		out[f[0]] = refs
	}
	return out, sc.Err()
}
