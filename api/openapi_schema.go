package api

import (
	"reflect"
	"strings"
	"time"
)

// schemaSet turns Go types into OpenAPI 3 schemas, naming struct types as
// components so each appears once.
type schemaSet struct {
	components map[string]any
}

var timeType = reflect.TypeOf(time.Time{})

// of returns the schema of v's type (nil v: no schema).
func (s *schemaSet) of(v any) map[string]any {
	if v == nil {
		return nil
	}
	return s.schema(reflect.TypeOf(v))
}

func (s *schemaSet) schema(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t.Kind() == reflect.Struct:
		name := componentName(t.Name())
		if name == "" {
			return s.object(t)
		}
		if _, ok := s.components[name]; !ok {
			s.components[name] = map[string]any{} // breaks recursion
			s.components[name] = s.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "format": "byte"}
		}
		return map[string]any{"type": "array", "items": s.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": s.schema(t.Elem())}
	default:
		return map[string]any{}
	}
}

// object describes a struct by its JSON fields; fields without omitempty
// are required.
func (s *schemaSet) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			embedded := s.object(f.Type)
			for k, v := range embedded["properties"].(map[string]any) {
				props[k] = v
			}
			if req, ok := embedded["required"].([]string); ok {
				required = append(required, req...)
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		props[name] = s.schema(f.Type)
		if !strings.Contains(opts, "omitempty") {
			required = append(required, name)
		}
	}
	out := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

// componentName is a schema component's name for a Go type name: a
// generic type's ("Page[example.com/x.Thing]") becomes its name followed
// by its type arguments' ("PageThing"), since component names allow only
// letters, digits, '.', '-' and '_'.
func componentName(goName string) string {
	base, args, ok := strings.Cut(goName, "[")
	if !ok {
		return goName
	}
	var b strings.Builder
	b.WriteString(base)
	for _, arg := range strings.Split(strings.TrimSuffix(args, "]"), ",") {
		arg = strings.TrimLeft(arg, "*[]")
		if i := strings.LastIndex(arg, "."); i >= 0 {
			arg = arg[i+1:]
		}
		b.WriteString(strings.Map(func(r rune) rune {
			if r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
				return r
			}
			return -1
		}, arg))
	}
	return b.String()
}
