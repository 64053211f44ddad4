package report

import (
	"math"
	"reflect"
)

// finiteCopy returns v with every NaN and ±Inf replaced, for JSON, which
// has no way to write them (encoding/json refuses the whole document). An
// optional number (*float64) that is not finite becomes null; a plain one
// becomes ±math.MaxFloat64 for ±Inf (a ratio over a zero denominator) and
// 0 for NaN. v itself is not modified: the copy shares only what holds no
// float.
func finiteCopy(v any) any {
	if v == nil {
		return nil
	}
	out, _ := finiteValue(reflect.ValueOf(v))
	return out.Interface()
}

// finiteValue returns rv's finite copy and whether anything changed (when
// nothing did, rv itself is returned to avoid copying).
func finiteValue(rv reflect.Value) (reflect.Value, bool) {
	switch rv.Kind() {
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		if !math.IsNaN(f) && !math.IsInf(f, 0) {
			return rv, false
		}
		out := reflect.New(rv.Type()).Elem()
		switch {
		case math.IsInf(f, 1):
			out.SetFloat(math.MaxFloat64)
		case math.IsInf(f, -1):
			out.SetFloat(-math.MaxFloat64)
		}
		if rv.Kind() == reflect.Float32 && math.IsInf(f, 0) {
			out.SetFloat(math.Copysign(math.MaxFloat32, f))
		}
		return out, true
	case reflect.Pointer:
		if rv.IsNil() {
			return rv, false
		}
		if k := rv.Elem().Kind(); k == reflect.Float64 || k == reflect.Float32 {
			if f := rv.Elem().Float(); math.IsNaN(f) || math.IsInf(f, 0) {
				return reflect.Zero(rv.Type()), true // null
			}
			return rv, false
		}
		elem, changed := finiteValue(rv.Elem())
		if !changed {
			return rv, false
		}
		p := reflect.New(rv.Type().Elem())
		p.Elem().Set(elem)
		return p, true
	case reflect.Interface:
		if rv.IsNil() {
			return rv, false
		}
		elem, changed := finiteValue(rv.Elem())
		if !changed {
			return rv, false
		}
		out := reflect.New(rv.Type()).Elem()
		out.Set(elem)
		return out, true
	case reflect.Struct:
		var out reflect.Value
		for i := 0; i < rv.NumField(); i++ {
			if !rv.Type().Field(i).IsExported() {
				continue
			}
			f, changed := finiteValue(rv.Field(i))
			if !changed {
				continue
			}
			if !out.IsValid() {
				out = reflect.New(rv.Type()).Elem()
				out.Set(rv) // keeps unexported state (time.Time's, say)
			}
			out.Field(i).Set(f)
		}
		if out.IsValid() {
			return out, true
		}
		return rv, false
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return rv, false
		}
		var out reflect.Value
		for i := 0; i < rv.Len(); i++ {
			e, changed := finiteValue(rv.Index(i))
			if !changed {
				continue
			}
			if !out.IsValid() {
				if rv.Kind() == reflect.Slice {
					out = reflect.MakeSlice(rv.Type(), rv.Len(), rv.Len())
					reflect.Copy(out, rv)
				} else {
					out = reflect.New(rv.Type()).Elem()
					out.Set(rv)
				}
			}
			out.Index(i).Set(e)
		}
		if out.IsValid() {
			return out, true
		}
		return rv, false
	case reflect.Map:
		if rv.IsNil() {
			return rv, false
		}
		var out reflect.Value
		iter := rv.MapRange()
		for iter.Next() {
			e, changed := finiteValue(iter.Value())
			if !changed {
				continue
			}
			if !out.IsValid() {
				out = reflect.MakeMapWithSize(rv.Type(), rv.Len())
				for it := rv.MapRange(); it.Next(); {
					out.SetMapIndex(it.Key(), it.Value())
				}
			}
			out.SetMapIndex(iter.Key(), e)
		}
		if out.IsValid() {
			return out, true
		}
		return rv, false
	}
	return rv, false
}
