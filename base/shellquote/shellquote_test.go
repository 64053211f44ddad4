package shellquote

import (
	"os/exec"
	"testing"
)

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"":               "''",
		"eth0":           "eth0",
		"net.core.x=1":   "net.core.x=1",
		"a b":            "'a b'",
		"x$(touch f)":    "'x$(touch f)'",
		"it's":           `'it'\''s'`,
		"a;b|c&d`e`":     "'a;b|c&d`e`'",
		"new\nline":      `$'new\x0aline'`,
		"esc\x1b[31m":    `$'esc\x1b[31m'`,
		"bad\xffutf8'\\": `$'bad\xffutf8\'\\'`,
		"*":              "'*'",
		"~root":          "'~root'",
		"é":              "'é'",
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}

// hostile are words a tenant can choose for an interface, table or file
// name; each must reach a real shell as exactly itself.
var hostile = []string{
	"x$(touch${IFS}f)", "v$(>pwned)", "a'b", `a"b`, "a;b", "a|b", "a`id`b", "a\\b",
	"$HOME", "a\nb", "-n", "a b\tc", "\x1b]0;title\x07", "*", "!!", "a&&b", "\xff\xfe", "'", "''", `\'`,
}

func TestQuoteRoundTripsThroughShells(t *testing.T) {
	for _, sh := range []string{"bash", "busybox"} {
		path, err := exec.LookPath(sh)
		if err != nil {
			continue
		}
		args := []string{"-c"}
		if sh == "busybox" {
			args = []string{"sh", "-c"}
		}
		for _, word := range hostile {
			// printf '%s' WORD prints the word back only if the shell saw
			// one literal argument: no expansion, splitting or execution.
			out, err := exec.Command(path, append(args, "printf '%s' "+Quote(word))...).Output()
			if err != nil {
				t.Fatalf("%s: %v", sh, err)
			}
			if string(out) != word {
				t.Errorf("%s read %s as %q, want %q", sh, Quote(word), out, word)
			}
		}
	}
}

func TestJoin(t *testing.T) {
	if got, want := Join("ethtool", "-K", "v$(x)", "rx-gro", "off"), "ethtool -K 'v$(x)' rx-gro off"; got != want {
		t.Errorf("Join = %s, want %s", got, want)
	}
}

func FuzzQuote(f *testing.F) {
	for _, w := range hostile {
		f.Add(w)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := Quote(s)
		// The rendering is one line and free of raw control bytes, so a
		// terminal shows exactly what would be pasted.
		for i := 0; i < len(q); i++ {
			if q[i] < 0x20 || q[i] == 0x7f {
				t.Fatalf("Quote(%q) = %q holds control byte %#x", s, q, q[i])
			}
		}
		if q == "" {
			t.Fatalf("Quote(%q) is empty", s)
		}
	})
}
