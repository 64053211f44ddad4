package probes

import (
	"fmt"
	"strconv"
	"strings"
)

// The probes' snapshots are maps keyed by small structs (a queue of a
// device, a call site). MarshalKey and UnmarshalKey give such keys a text
// form — their fields joined by '/' — so a snapshot encodes as JSON
// (encoding/json takes map keys that implement encoding.TextMarshaler):
// recorded snapshots are readable test fixtures.

// MarshalKey joins integer fields with '/'.
func MarshalKey(fields ...int64) []byte {
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = strconv.FormatInt(f, 10)
	}
	return []byte(strings.Join(parts, "/"))
}

// UnmarshalKey splits text made by MarshalKey into exactly len(dst) integer
// fields.
func UnmarshalKey(text []byte, dst ...*int64) error {
	parts := strings.Split(string(text), "/")
	if len(parts) != len(dst) {
		return fmt.Errorf("key %q: want %d fields", text, len(dst))
	}
	for i, p := range parts {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return fmt.Errorf("key %q: %w", text, err)
		}
		*dst[i] = v
	}
	return nil
}

// CommString is a task's name as the kernel's comm arrays hold it (the
// generated C char[16] is [16]int8): up to the first NUL.
func CommString(c [16]int8) string {
	b := make([]byte, 0, len(c))
	for _, v := range c {
		if v == 0 {
			break
		}
		b = append(b, byte(v))
	}
	return string(b)
}
