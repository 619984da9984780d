package api

import (
	"cmp"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

// TagOpenAPI is the struct tag that refines a field's schema. Options:
// "readonly" (the server sets it; a client leaves it out) and "optional"
// (always in responses; a request may leave it out for a default).
const TagOpenAPI = "openapi"

// JSONShaper is implemented by types with a custom MarshalJSON: JSONShape
// returns a value whose type's fields have the same JSON.
type JSONShaper interface {
	JSONShape() any
}

// Schemer is implemented by types whose JSON their Go shape does not
// describe (raw JSON a handler validates itself): OpenAPISchema returns
// the type's OpenAPI 3.0 schema, a fresh map each call (a value receiver's
// method). A named type's schema is a component of its name; a field of
// the type is nullable only as that schema says (or as a pointer).
type Schemer interface {
	OpenAPISchema() map[string]any
}

// schemaSet turns Go types into OpenAPI 3 schemas, named struct types as
// components.
type schemaSet struct {
	components map[string]any
	names      map[reflect.Type]string
}

var (
	timeType          = reflect.TypeOf(time.Time{})
	rawMessageType    = reflect.TypeOf(json.RawMessage{})
	textMarshalerType = reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem()
	jsonShaperType    = reflect.TypeOf((*JSONShaper)(nil)).Elem()
	schemerType       = reflect.TypeOf((*Schemer)(nil)).Elem()
)

// newSchemaSet names the struct types reachable from values uniquely: by
// their own name, else qualified by package ("feed.Subscription"), else by
// package path.
func newSchemaSet(values ...any) *schemaSet {
	s := &schemaSet{components: map[string]any{}, names: map[reflect.Type]string{}}
	seen := map[reflect.Type]bool{}
	var types []reflect.Type
	for _, v := range values {
		if v != nil {
			collectStructs(reflect.TypeOf(v), seen, &types)
		}
	}
	slices.SortFunc(types, func(a, b reflect.Type) int { return strings.Compare(typeKey(a), typeKey(b)) })
	for level := 0; len(types) > 0; level++ {
		byName := map[string][]reflect.Type{}
		for _, t := range types {
			n := qualifiedName(t, level)
			byName[n] = append(byName[n], t)
		}
		var left []reflect.Type
		for _, t := range types {
			n := qualifiedName(t, level)
			switch {
			case len(byName[n]) == 1:
				s.names[t] = n
			case level == 2: // generic instances alike but for arguments' paths
				s.names[t] = fmt.Sprintf("%s_%d", n, slices.Index(byName[n], t)+1)
			default:
				left = append(left, t)
			}
		}
		types = left
	}
	return s
}

// typeKey identifies a type by package path and name.
func typeKey(t reflect.Type) string { return t.PkgPath() + "." + t.Name() }

// collectStructs appends to out every named struct or Schemer type
// reachable from t.
func collectStructs(t reflect.Type, seen map[reflect.Type]bool, out *[]reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if seen[t] {
		return
	}
	seen[t] = true
	if t.Implements(schemerType) {
		if t.Name() != "" {
			*out = append(*out, t)
		}
		return
	}
	if special(t) != nil {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if t.Name() != "" {
			*out = append(*out, t)
		}
		shape := shapeOf(t)
		for i := 0; i < shape.NumField(); i++ {
			if f := shape.Field(i); f.IsExported() || f.Anonymous {
				collectStructs(f.Type, seen, out)
			}
		}
	case reflect.Slice, reflect.Array, reflect.Map:
		collectStructs(t.Elem(), seen, out)
	}
}

// shapeOf is the struct type whose fields describe t's JSON.
func shapeOf(t reflect.Type) reflect.Type {
	if t.Implements(jsonShaperType) {
		if v, ok := reflect.Zero(t).Interface().(JSONShaper); ok {
			st := reflect.TypeOf(v.JSONShape())
			for st.Kind() == reflect.Pointer {
				st = st.Elem()
			}
			return st
		}
	}
	return t
}

// special returns the schema of types whose JSON is not their Go shape.
func special(t reflect.Type) map[string]any {
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == rawMessageType:
		return map[string]any{} // any JSON value
	case t.Kind() != reflect.Struct && t.Implements(textMarshalerType),
		t.Kind() == reflect.Struct && !t.Implements(jsonShaperType) && t.Implements(textMarshalerType):
		return map[string]any{"type": "string"}
	}
	return nil
}

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
	if t.Implements(schemerType) {
		return s.component(t, func() map[string]any { return reflect.Zero(t).Interface().(Schemer).OpenAPISchema() })
	}
	if sch := special(t); sch != nil {
		return sch
	}
	if t.Kind() == reflect.Struct {
		return s.component(t, func() map[string]any { return s.object(shapeOf(t)) })
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

// component returns a reference to t's component, built once, or the
// schema itself when t has no component name.
func (s *schemaSet) component(t reflect.Type, build func() map[string]any) map[string]any {
	name, ok := s.names[t]
	if !ok {
		return build()
	}
	if _, ok := s.components[name]; !ok {
		s.components[name] = map[string]any{} // breaks recursion
		s.components[name] = build()
	}
	return map[string]any{"$ref": "#/components/schemas/" + name}
}

// object describes a struct by its JSON fields: required without
// omitempty (unless optional), nullable when null may be sent or received.
func (s *schemaSet) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var requiredNames []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			embedded := s.object(shapeOf(f.Type))
			for k, v := range embedded["properties"].(map[string]any) {
				props[k] = v
			}
			if req, ok := embedded["required"].([]string); ok {
				requiredNames = append(requiredNames, req...)
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		name = cmp.Or(name, f.Name)
		omitEmpty := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
		sch := s.schema(f.Type)
		openapiOpts := strings.Split(f.Tag.Get(TagOpenAPI), ",")
		readOnly := slices.Contains(openapiOpts, "readonly")
		required := !omitEmpty && !slices.Contains(openapiOpts, "optional")
		ownNull := f.Type == rawMessageType || f.Type.Kind() != reflect.Pointer && f.Type.Implements(schemerType)
		nullable := (!omitEmpty && nilable(f.Type) || !required) && !ownNull
		if readOnly || nullable {
			if _, ref := sch["$ref"]; ref {
				sch = map[string]any{"allOf": []any{sch}}
			}
			if readOnly {
				sch["readOnly"] = true
			}
			if nullable {
				sch["nullable"] = true
			}
		}
		props[name] = sch
		if required {
			requiredNames = append(requiredNames, name)
		}
	}
	out := map[string]any{"type": "object", "properties": props}
	if len(requiredNames) > 0 {
		out["required"] = requiredNames
	}
	return out
}

// nilable reports whether a value of t can encode as JSON null.
func nilable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		return true
	}
	return false
}

// qualifiedName is t's component name at a level: 0 its own, 1 with its
// package's short name, 2 with its path. A generic type's is followed by
// its arguments' ("Page[x/feed.Item]" is "PageItem", "Page.feed.Item").
func qualifiedName(t reflect.Type, level int) string {
	base, args, generic := strings.Cut(t.Name(), "[")
	var b strings.Builder
	if level > 0 && !generic {
		b.WriteString(packageName(t.PkgPath(), level))
		b.WriteString(".")
	}
	b.WriteString(base)
	if !generic {
		return sanitize(b.String())
	}
	for _, arg := range splitTypeArgs(strings.TrimSuffix(args, "]")) {
		arg = strings.TrimLeft(arg, "*[]")
		pkg, name := "", arg
		if i := strings.LastIndex(arg, "."); i >= 0 {
			pkg, name = arg[:i], arg[i+1:]
		}
		if level > 0 && pkg != "" {
			b.WriteString(".")
			b.WriteString(packageName(pkg, level))
			b.WriteString(".")
		}
		b.WriteString(name)
	}
	return sanitize(b.String())
}

// splitTypeArgs splits a type argument list at its top-level commas.
func splitTypeArgs(args string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range args {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, args[start:i])
				start = i + 1
			}
		}
	}
	return append(out, args[start:])
}

// packageName is a package's name at a level: at 1 its path's last
// element (a flow's for …/httpapi), at 2 its path.
func packageName(path string, level int) string {
	if level >= 2 {
		return path
	}
	parts := strings.Split(path, "/")
	last := parts[len(parts)-1]
	if last == "httpapi" && len(parts) > 1 {
		last = parts[len(parts)-2]
	}
	return last
}

// sanitize keeps the characters a component name allows.
func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		if r == '/' {
			return '.'
		}
		return -1
	}, name)
}
