package comic

import "encoding/json"

// SchemaID is the $id of the published comic schema.
const SchemaID = "/v1/schemas/comic.json"

// JSONSchema returns the comic's JSON Schema (draft 2020-12), built from
// the validator's field table; a subscription body requires no field.
func JSONSchema() []byte {
	props := map[string]any{}
	var required []string
	for _, f := range fields {
		p := map[string]any{"description": f.doc}
		switch f.kind {
		case kindString:
			p["type"] = "string"
			p["minLength"] = f.minLen
			p["maxLength"] = f.maxLen
			p["pattern"] = `^\S(.*\S)?$|^$`
		case kindInt:
			p["type"] = "integer"
			p["minimum"] = f.min
			p["maximum"] = f.max
		case kindGrade:
			p["type"] = "number"
			p["enum"] = CGCGrades
		case kindBool:
			p["type"] = "boolean"
		}
		if f.def != nil {
			p["default"] = f.def
		}
		props[f.name] = p
		if f.required {
			required = append(required, f.name)
		}
	}
	doc := map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"$id":                  SchemaID,
		"title":                "Comic",
		"description":          "A comic book for sale. Its canonical form (keys sorted, defaults filled, no white space) is its identity. A subscription body is a partial comic: any subset of these properties, matched by equality (strings case-insensitively).",
		"type":                 "object",
		"properties":           props,
		"required":             required,
		"additionalProperties": false,
	}
	out, _ := json.MarshalIndent(doc, "", "  ")
	return out
}
