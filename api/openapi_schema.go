package api

import (
	"cmp"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3gen"
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

// schemaSet holds the OpenAPI 3 schemas of Go types, made with openapi3gen:
// named struct and Schemer types as components.
type schemaSet struct {
	gen        *openapi3gen.Generator
	components openapi3.Schemas
	// refs are the schemas of the values' types.
	refs map[reflect.Type]*openapi3.SchemaRef
	// names are the component names of the named struct and Schemer types.
	names map[reflect.Type]string
	// shapes are JSONShape types, described in place of their type.
	shapes map[reflect.Type]bool
	// found collects the types to name, on a first pass (names is empty).
	found map[reflect.Type]bool
}

var (
	timeType          = reflect.TypeOf(time.Time{})
	rawMessageType    = reflect.TypeOf(json.RawMessage{})
	textMarshalerType = reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem()
	jsonShaperType    = reflect.TypeOf((*JSONShaper)(nil)).Elem()
	schemerType       = reflect.TypeOf((*Schemer)(nil)).Elem()
)

// newSchemaSet makes the schemas of values' types, naming the types
// reachable from them uniquely: by their own name, else qualified by
// package ("feed.Subscription"), else by package path. The error
// envelope's component is Error.
func newSchemaSet(values ...any) *schemaSet {
	first := newSchemas(nil, values)
	names := map[reflect.Type]string{}
	for level := 0; len(first.found) > 0; level++ {
		count := map[string]int{}
		for t := range first.found {
			count[qualifiedName(t, level)]++
		}
		for t := range first.found {
			if n := qualifiedName(t, level); count[n] == 1 || level == 2 {
				names[t] = n
				delete(first.found, t)
			}
		}
	}
	names[reflect.TypeOf(envelope{})] = "Error"
	return newSchemas(names, values)
}

// newSchemas makes the schemas of values' types, naming components by
// names; with no names, it collects the types to name instead.
func newSchemas(names map[reflect.Type]string, values []any) *schemaSet {
	s := &schemaSet{components: openapi3.Schemas{}, refs: map[reflect.Type]*openapi3.SchemaRef{}, names: names, shapes: map[reflect.Type]bool{}}
	if names == nil {
		s.names, s.found = map[reflect.Type]string{}, map[reflect.Type]bool{}
	}
	s.gen = openapi3gen.NewGenerator(openapi3gen.UseAllExportedFields(), openapi3gen.SchemaCustomizer(s.customize),
		openapi3gen.CreateComponentSchemas(openapi3gen.ExportComponentSchemasOptions{
			ExportComponentSchemas: true, ExportTopLevelSchema: true, ExportGenerics: true}),
		openapi3gen.CreateTypeNameGenerator(func(t reflect.Type) string {
			if s.found == nil || s.shapes[t] || special(t) || t.Name() == "" {
				return s.names[t] // none: described in place
			}
			s.found[t] = true
			return sanitize(t.PkgPath() + "." + t.Name()) // unique, on the first pass
		}))
	for _, v := range values {
		if t := reflect.TypeOf(v); t != nil && s.refs[t] == nil {
			ref, err := s.gen.GenerateSchemaRef(t)
			if err != nil {
				panic(fmt.Sprintf("api: the schema of %v: %v", t, err))
			}
			s.refs[t] = cmp.Or(s.ref(t), ref)
		}
	}
	// This moves every component generated so far into s.components and
	// turns the references into either a $ref or a schema.
	if _, err := s.gen.NewSchemaRefForValue(struct{}{}, s.components); err != nil {
		panic(fmt.Sprintf("api: the components: %v", err))
	}
	return s
}

// special reports whether t's JSON is a string other than its Go shape
// says (a TextMarshaler).
func special(t reflect.Type) bool {
	return t != timeType && t.Implements(textMarshalerType) && (t.Kind() != reflect.Struct || !t.Implements(jsonShaperType))
}

// of returns the schema of v's type (nil v: no schema).
func (s *schemaSet) of(v any) *openapi3.SchemaRef {
	return s.refs[reflect.TypeOf(v)]
}

// ref returns a reference to t's component, or nil when t has none.
func (s *schemaSet) ref(t reflect.Type) *openapi3.SchemaRef {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n := s.names[t]; n != "" {
		return openapi3.NewSchemaRef("#/components/schemas/"+n, nil)
	}
	return nil
}

// customize adapts the schema openapi3gen made of t to the JSON of t.
func (s *schemaSet) customize(_ string, t reflect.Type, _ reflect.StructTag, sch *openapi3.Schema) error {
	switch {
	case t.Implements(schemerType):
		if s.found != nil {
			s.found[t] = true
		}
		data, err := json.Marshal(reflect.Zero(t).Interface().(Schemer).OpenAPISchema())
		if err != nil {
			return err
		}
		*sch = openapi3.Schema{}
		if n := s.names[t]; n != "" {
			s.components[n] = openapi3.NewSchemaRef("", sch)
		}
		return sch.UnmarshalJSON(data)
	case t.Kind() == reflect.Struct && t.Implements(jsonShaperType):
		shape := reflect.TypeOf(reflect.Zero(t).Interface().(JSONShaper).JSONShape())
		s.shapes[shape] = true
		ref, err := s.gen.GenerateSchemaRef(shape)
		if err == nil {
			*sch = *ref.Value
		}
		return err
	case special(t):
		*sch = *openapi3.NewStringSchema()
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Float64:
		// Any integer or number, as clients take it.
		sch.Format, sch.Min, sch.Max = "", nil, nil
	case t.Kind() == reflect.Slice && sch.Items != nil:
		sch.Items = cmp.Or(s.ref(t.Elem()), sch.Items)
	case t.Kind() == reflect.Map && sch.AdditionalProperties.Schema != nil:
		sch.AdditionalProperties.Schema = cmp.Or(s.ref(t.Elem()), sch.AdditionalProperties.Schema)
	case t.Kind() == reflect.Struct && t != timeType:
		s.object(t, sch)
	}
	return nil
}

// object refines a struct's properties: required without omitempty
// (unless optional), nullable when null may be sent or received, readOnly
// as tagged; a component so refined is referenced through allOf.
func (s *schemaSet) object(t reflect.Type, sch *openapi3.Schema) {
	sch.Type = &openapi3.Types{openapi3.TypeObject}
	if sch.Properties == nil {
		sch.Properties = openapi3.Schemas{}
	}
	for _, f := range reflect.VisibleFields(t) {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		name = cmp.Or(name, f.Name)
		prop := sch.Properties[name]
		if !f.IsExported() || prop == nil {
			continue // an embedded struct's fields are its own, or none
		}
		omitEmpty := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
		openapiOpts := strings.Split(f.Tag.Get(TagOpenAPI), ",")
		readOnly := slices.Contains(openapiOpts, "readonly")
		required := !omitEmpty && !slices.Contains(openapiOpts, "optional")
		ownNull := f.Type == rawMessageType || f.Type.Kind() != reflect.Pointer && f.Type.Implements(schemerType)
		nullable := (!omitEmpty && nilable(f.Type) || !required) && !ownNull
		if ref := s.ref(f.Type); ref != nil {
			prop = ref
			if readOnly || nullable {
				prop = openapi3.NewSchemaRef("", &openapi3.Schema{AllOf: openapi3.SchemaRefs{ref}})
			}
		}
		if prop.Value != nil {
			prop.Value.ReadOnly, prop.Value.Nullable = readOnly, nullable
		}
		sch.Properties[name] = prop
		if required {
			sch.Required = append(sch.Required, name)
		}
	}
}

// nilable reports whether a value of t can encode as JSON null.
func nilable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		return true
	}
	return false
}

// typeArgPackage matches the package path qualifying a type argument
// ("github.com/x/feed." of "Page[github.com/x/feed.Item]").
var typeArgPackage = regexp.MustCompile(`[\w./-]+\.`)

// qualifiedName is t's component name at a level: 0 its own, 1 with its
// package's short name, 2 with its path. A generic type's is followed by
// its arguments' ("Page[x/feed.Item]" is "PageItem", "Page.feed.Item").
func qualifiedName(t reflect.Type, level int) string {
	name := t.Name()
	switch {
	case level >= 2:
		name = t.PkgPath() + "." + name
	case level == 1 && !strings.Contains(name, "["):
		name = packageName(t.PkgPath()) + "." + name
	default:
		name = typeArgPackage.ReplaceAllStringFunc(name, func(pkg string) string {
			if level == 0 {
				return ""
			}
			return "." + packageName(strings.TrimSuffix(pkg, ".")) + "."
		})
	}
	return sanitize(name)
}

// packageName is a package's short name: its path's last element (a
// flow's for …/httpapi).
func packageName(path string) string {
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
