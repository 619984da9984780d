// Package settings states a config's defaults and ranges once, as struct
// tags, and applies them by reflection:
//
//   - `default:"5m"` is the field's default (Defaults, BindFlags);
//   - `range:"lo..hi"` is the values Check accepts, hi left out for no upper
//     bound; a bound may name another field of the struct ("1ms..FreshBound");
//   - `flag:"name"` binds the field as a flag (BindFlags), with `help:"…"` as
//     its usage.
//
// Values are written as flags take them: durations as time.ParseDuration
// reads them, integers with an optional KiB, MiB or GiB suffix. Fields may be
// time.Duration, int, int64, uint64, float64, string or bool; nested structs
// are not entered, so a nested config applies its own tags.
package settings

import (
	"errors"
	"flag"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Defaults sets each zero field of the struct cfg points to that has a
// default tag to that default.
func Defaults(cfg any) {
	fields(cfg, func(f reflect.Value, t reflect.StructField) {
		if def := t.Tag.Get("default"); def != "" && f.IsZero() {
			f.Set(parse(t, def))
		}
	})
}

// BindFlags binds a flag on fs for each field of the struct cfg points to
// that has a flag tag, starting at its default tag (else its value).
func BindFlags(fs *flag.FlagSet, cfg any) {
	fields(cfg, func(f reflect.Value, t reflect.StructField) {
		name := t.Tag.Get("flag")
		if name == "" {
			return
		}
		if def := t.Tag.Get("default"); def != "" {
			f.Set(parse(t, def))
		}
		bind(fs, name, f.Addr().Interface(), t.Tag.Get("help"))
	})
}

// Prepare sets the defaults of the struct cfg points to, then checks it.
func Prepare(prefix string, cfg any) error {
	Defaults(cfg)
	return Check(prefix, cfg)
}

// Check reports every field of the struct cfg points to outside its range
// tag, as "prefix: name value out of range lo..hi". The name is the flag tag
// with dashes as spaces, else the field's name in lower-case words
// (MaxInFlight: "max in flight"); a bound naming a field reads as that
// field's name and value.
func Check(prefix string, cfg any) error {
	var errs []error
	v := reflect.ValueOf(cfg).Elem()
	fields(cfg, func(f reflect.Value, t reflect.StructField) {
		lo, hi, ok := strings.Cut(t.Tag.Get("range"), "..")
		if !ok {
			return
		}
		x := number(f)
		loV, loText := bound(v, t, lo)
		hiV, hiText := bound(v, t, hi)
		if x >= loV && (hi == "" || x <= hiV) {
			return
		}
		msg := fmt.Sprintf("%s %v out of range %s..%s", name(t), f.Interface(), loText, hiText)
		if prefix != "" {
			msg = prefix + ": " + msg
		}
		errs = append(errs, errors.New(msg))
	})
	return errors.Join(errs...)
}

// bound is the range bound s of field t of the struct v, as a number and as
// the text of an error.
func bound(v reflect.Value, t reflect.StructField, s string) (float64, string) {
	if s == "" {
		return 0, ""
	}
	if other, ok := v.Type().FieldByName(s); ok {
		f := v.FieldByIndex(other.Index)
		return number(f), fmt.Sprintf("%s %v", name(other), f.Interface())
	}
	return number(parse(t, s)), s
}

// name is how errors call field t: its flag with dashes as spaces, else its
// name in lower-case words.
func name(t reflect.StructField) string {
	if f := t.Tag.Get("flag"); f != "" {
		return strings.ReplaceAll(f, "-", " ")
	}
	var b strings.Builder
	r := []rune(t.Name)
	for i, c := range r {
		// A word starts at an upper-case letter after a lower-case one, or
		// before a lower-case one at the end of an acronym (HTMLTemplate).
		if i > 0 && unicode.IsUpper(c) && (unicode.IsLower(r[i-1]) || i+1 < len(r) && unicode.IsLower(r[i+1])) {
			b.WriteByte(' ')
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

// fields calls fn with each field of the struct cfg points to.
func fields(cfg any, fn func(reflect.Value, reflect.StructField)) {
	v := reflect.ValueOf(cfg).Elem()
	for i := range v.NumField() {
		fn(v.Field(i), v.Type().Field(i))
	}
}

// parse is s as the flag of field t reads it, or an integer with a size
// suffix; a malformed tag panics.
func parse(t reflect.StructField, s string) reflect.Value {
	p := reflect.New(t.Type)
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	bind(fs, "v", p.Interface(), "")
	err := fs.Set("v", s)
	if n, ok := size(s); err != nil && ok && p.Elem().CanInt() {
		p.Elem().SetInt(n)
		err = nil
	}
	if err != nil {
		panic(fmt.Sprintf("settings: %s %q: %v", t.Name, s, err))
	}
	return p.Elem()
}

// size is s, a count of KiB, MiB or GiB, in bytes.
func size(s string) (int64, bool) {
	for i, unit := range []string{"KiB", "MiB", "GiB"} {
		if n, ok := strings.CutSuffix(s, unit); ok {
			x, err := strconv.ParseInt(n, 10, 64)
			return x << (10 * (i + 1)), err == nil
		}
	}
	return 0, false
}

// number is v, an integer or a float, as a float.
func number(v reflect.Value) float64 {
	switch {
	case v.CanInt():
		return float64(v.Int())
	case v.CanUint():
		return float64(v.Uint())
	}
	return v.Float()
}

// bind binds the flag name on fs to p, its default *p.
func bind(fs *flag.FlagSet, name string, p any, usage string) {
	switch p := p.(type) {
	case *int:
		fs.IntVar(p, name, *p, usage)
	case *int64:
		fs.Int64Var(p, name, *p, usage)
	case *uint64:
		fs.Uint64Var(p, name, *p, usage)
	case *float64:
		fs.Float64Var(p, name, *p, usage)
	case *bool:
		fs.BoolVar(p, name, *p, usage)
	case *string:
		fs.StringVar(p, name, *p, usage)
	case *time.Duration:
		fs.DurationVar(p, name, *p, usage)
	default:
		panic(fmt.Sprintf("settings: flag %s of type %T", name, p))
	}
}
