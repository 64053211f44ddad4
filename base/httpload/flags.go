package httpload

import (
	"context"
	"fmt"
	"strings"

	"github.com/perfscope/perfscope/base/safeio"
)

// MaxBodyFile bounds a request body read from a file (--body @FILE).
const MaxBodyFile = 64 << 20

// SetFlags gives s a command's --header and --body: each header a
// Name:value line (s.Header must not be nil), the body as given or, after
// a leading @, read from that file. The sentences name the flags.
func (s *Spec) SetFlags(headers []string, body string) error {
	for _, h := range headers {
		if err := ParseHeader(s.Header, h); err != nil {
			return fmt.Errorf("--header: %v", err)
		}
	}
	if file, ok := strings.CutPrefix(body, "@"); ok {
		b, err := safeio.ReadFile(context.Background(), file, MaxBodyFile)
		if err != nil {
			return fmt.Errorf("--body @%s: %v", file, err)
		}
		s.Body = b
	} else if body != "" {
		s.Body = []byte(body)
	}
	return nil
}

// CheckHeaders refuses a --header that is not one line.
func CheckHeaders(headers []string) error {
	for _, h := range headers {
		if strings.ContainsAny(h, "\r\n") {
			return fmt.Errorf("--header %q: a header is one line", h)
		}
	}
	return nil
}
