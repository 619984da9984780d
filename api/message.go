package api

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
)

// goTypeError matches encoding/json's type error text, which names Go
// types and struct fields ("json: cannot unmarshal string into Go struct
// field Watcher.venue of type int"), wherever a handler let it through.
var goTypeError = regexp.MustCompile(`(?:json: )?cannot unmarshal (\w+) into Go (?:struct field (\S+)|value) of type (\S+)`)

// clientMessage makes msg fit for a client: encoding/json's Go type errors
// become the JSON field and kinds, its "json: " prefixes go, newlines (from
// errors.Join) become "; ", and a prefix repeated back to back ("invalid
// x: invalid x: ...") is said once.
func clientMessage(msg string) string {
	msg = goTypeError.ReplaceAllStringFunc(msg, func(m string) string {
		sub := goTypeError.FindStringSubmatch(m)
		got, path, typ := sub[1], sub[2], sub[3]
		want := goKindName(typ)
		if path == "" {
			return "the value must be a JSON " + want + ", not " + got
		}
		if _, field, ok := strings.Cut(path, "."); ok { // drop the Go struct name
			path = field
		}
		return `field "` + path + `" must be a JSON ` + want + ", not " + got
	})
	msg = strings.ReplaceAll(msg, "json: ", "")
	msg = strings.Join(strings.FieldsFunc(msg, func(r rune) bool { return r == '\n' || r == '\r' }), "; ")
	return strings.Join(slices.CompactFunc(strings.Split(msg, ": "), strings.EqualFold), ": ")
}

// goKindName names the JSON kind a Go type, written as in a Go error,
// decodes from.
func goKindName(typ string) string {
	switch {
	case strings.HasPrefix(typ, "[]"), strings.HasPrefix(typ, "["):
		return "array"
	case strings.HasPrefix(typ, "map["):
		return "object"
	case typ == "string":
		return "string"
	case typ == "bool":
		return "boolean"
	case strings.HasPrefix(typ, "int"), strings.HasPrefix(typ, "uint"), strings.HasPrefix(typ, "float"),
		typ == "time.Duration":
		return "number"
	}
	return "value"
}

// jsonFieldPath turns the field path of a json.UnmarshalTypeError into the
// client's JSON names: a segment naming a Go embedded struct (as a type
// with its own UnmarshalJSON reports it, "sourceFields.id") is dropped.
// Segments are resolved against t, the type decoded into; one that matches
// no JSON name of t and is not the last is taken for a Go name.
func jsonFieldPath(t reflect.Type, path string) string {
	segs := strings.Split(path, ".")
	var out []string
	for i, seg := range segs {
		t = elemType(t)
		if t != nil && t.Kind() == reflect.Struct {
			if f, ok := jsonField(t, seg); ok {
				out = append(out, seg)
				t = f.Type
				continue
			}
			if f, ok := t.FieldByName(seg); ok && f.Anonymous {
				t = f.Type
				continue
			}
		}
		if i == len(segs)-1 || t == nil || t.Kind() != reflect.Struct {
			out = append(out, seg)
			t = nil
		}
	}
	if len(out) == 0 {
		return path
	}
	return strings.Join(out, ".")
}

// elemType strips pointers, slices, arrays and maps down to the element type.
func elemType(t reflect.Type) reflect.Type {
	for t != nil {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			t = t.Elem()
		default:
			return t
		}
	}
	return nil
}

// jsonField finds the field of struct t, promoted ones included, whose JSON
// name is name.
func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if f.Anonymous && tag == "" {
			if ft := elemType(f.Type); ft != nil && ft.Kind() == reflect.Struct {
				if g, ok := jsonField(ft, name); ok {
					return g, true
				}
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if tag == name || (tag == "" && strings.EqualFold(f.Name, name)) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
