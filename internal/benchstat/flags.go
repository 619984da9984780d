package benchstat

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// A bench's config states each setting once, as a struct field with tags:
// `flag:"name"` binds it as a flag (BindFlags), `default:"value"` is its
// default in the flag's syntax (Defaults and BindFlags), `help:"…"` the
// flag's usage, and `range:"lo..hi"` (hi may be left out) the values Check
// accepts.

// Defaults sets each zero field of the struct cfg points to that has a
// default tag to that default.
func Defaults(cfg any) { bindFields(nil, cfg) }

// BindFlags binds a flag on fs for each field of the struct cfg points to
// that has a flag tag, starting at its default tag (else its value).
func BindFlags(fs *flag.FlagSet, cfg any) { bindFields(fs, cfg) }

// Prepare sets the defaults of the struct cfg points to, then checks it.
func Prepare(prefix string, cfg any) error {
	Defaults(cfg)
	return Check(prefix, cfg)
}

// Check reports every field of the struct cfg points to outside its range
// tag, named by its flag (dashes as spaces) or field, after prefix.
func Check(prefix string, cfg any) error {
	var errs []error
	v := reflect.ValueOf(cfg).Elem()
	for i := range v.NumField() {
		field, t := v.Field(i), v.Type().Field(i)
		lo, hi, ok := strings.Cut(t.Tag.Get("range"), "..")
		if !ok {
			continue
		}
		x := number(field)
		if !(x >= number(parse(t.Type, lo)) && (hi == "" || x <= number(parse(t.Type, hi)))) {
			name := strings.ReplaceAll(cmp.Or(t.Tag.Get("flag"), strings.ToLower(t.Name)), "-", " ")
			errs = append(errs, fmt.Errorf("%s: %s %v out of range %s", prefix, name, field.Interface(), t.Tag.Get("range")))
		}
	}
	return errors.Join(errs...)
}

// parse is s parsed as a flag of type t.
func parse(t reflect.Type, s string) reflect.Value {
	p := reflect.New(t)
	fs := flag.NewFlagSet("", flag.PanicOnError)
	bind(fs, "v", p.Interface(), "")
	if err := fs.Set("v", s); err != nil {
		panic(fmt.Sprintf("benchstat: range %q: %v", s, err))
	}
	return p.Elem()
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

// bindFields binds the tagged fields of *cfg on fs; with fs nil, it sets
// the zero ones to their defaults.
func bindFields(fs *flag.FlagSet, cfg any) {
	v := reflect.ValueOf(cfg).Elem()
	for i := range v.NumField() {
		field, tag := v.Field(i), v.Type().Field(i).Tag
		name, def, on := tag.Get("flag"), tag.Get("default"), fs
		if fs == nil {
			if def == "" || !field.IsZero() {
				continue
			}
			name, on = "default", flag.NewFlagSet("", flag.PanicOnError)
		} else if name == "" {
			continue
		}
		bind(on, name, field.Addr().Interface(), tag.Get("help"))
		if def != "" {
			f := on.Lookup(name)
			if err := f.Value.Set(def); err != nil {
				panic(fmt.Sprintf("benchstat: default of %s: %v", name, err))
			}
			f.DefValue = f.Value.String()
		}
	}
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
		panic(fmt.Sprintf("benchstat: flag %s of type %T", name, p))
	}
}
