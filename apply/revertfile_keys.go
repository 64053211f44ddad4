package apply

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// exactKeys reads one JSON value from dec and checks its object keys
// against the Go type t: each must name a field exactly as its json tag
// spells it, and none may repeat. encoding/json matches keys without
// regard to case ("OLD" fills Old) and keeps the last of repeated keys,
// so a revert file could say one thing to a reader and another to
// perfscope; this refuses both before the file is decoded. where names
// the value in messages.
func exactKeys(dec *json.Decoder, t reflect.Type, where string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar: its form is the decoder's and Validate's
	}
	switch delim {
	case '{':
		var fields map[string]reflect.Type
		if t != nil && t.Kind() == reflect.Struct {
			fields = map[string]reflect.Type{}
			jsonFields(t, fields)
		}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			if seen[key] {
				return fmt.Errorf("key %q is given twice in %s", key, where)
			}
			seen[key] = true
			var ft reflect.Type
			switch {
			case fields != nil:
				if ft, ok = fields[key]; !ok {
					return fmt.Errorf("unknown field %q in %s (keys are matched exactly, case included)", key, where)
				}
			case t != nil && t.Kind() == reflect.Map:
				ft = t.Elem()
			}
			if err := exactKeys(dec, ft, where+"."+key); err != nil {
				return err
			}
		}
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := exactKeys(dec, elem, fmt.Sprintf("%s[%d]", where, i)); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

// jsonFields adds t's fields by their JSON names to fields, those of an
// untagged embedded struct as its own (as encoding/json promotes them).
func jsonFields(t reflect.Type, fields map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" && f.Anonymous && f.Type.Kind() == reflect.Struct {
			jsonFields(f.Type, fields)
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
}
