package comic

import (
	"encoding/json"
	"maps"
)

// SchemaID is the $id of the published comic schema.
const SchemaID = "/v1/schemas/comic.json"

// JSONSchema returns the comic's JSON Schema (draft 2020-12), with the
// subscription body's in $defs.
func JSONSchema() []byte {
	props := map[string]any{}
	bodyProps := map[string]any{}
	var required []string
	for _, f := range fields {
		props[f.name] = f.valueSchema()
		bodyProps[f.name] = map[string]any{"$ref": "#/properties/" + f.name}
		if f.ranged {
			bodyProps[f.name] = map[string]any{"anyOf": []any{map[string]any{"$ref": "#/properties/" + f.name}, f.rangeSchema()}}
		}
		if f.required {
			required = append(required, f.name)
		}
	}
	doc := map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"$id":                  SchemaID,
		"title":                "Comic",
		"description":          "A comic book for sale. Its canonical form (keys sorted, defaults filled, no white space) is its identity. A subscription body ($defs/subscriptionBody) is a partial comic: any subset of these properties, matched by equality (strings case-insensitively), or by a range {gte, lte} for grade, issue, price_cents and year.",
		"type":                 "object",
		"properties":           props,
		"required":             required,
		"additionalProperties": false,
		"$defs": map[string]any{"subscriptionBody": map[string]any{"type": "object", "properties": bodyProps, "additionalProperties": false,
			"description": bodyDescription}},
	}
	out, _ := json.MarshalIndent(doc, "", "  ")
	return out
}

const bodyDescription = "A subscription body: any subset of the comic's properties, each matched by equality (strings case-insensitively) or, for grade, issue, price_cents and year, by a range."

// BodySchema returns the subscription body's OpenAPI 3.0 schema: the
// comic's properties, none required nor defaulted, ranged ones oneOf a
// value or a range.
func BodySchema() map[string]any {
	props := map[string]any{}
	for _, f := range fields {
		v := f.valueSchema()
		delete(v, "default")
		props[f.name] = v
		if f.ranged {
			props[f.name] = map[string]any{"oneOf": []any{v, f.rangeSchema()}}
		}
	}
	return map[string]any{"type": "object", "properties": props, "additionalProperties": false, "description": bodyDescription}
}

// valueSchema is the schema of the field's value, in both JSON Schema and
// OpenAPI 3.0.
func (f fieldSpec) valueSchema() map[string]any {
	p := map[string]any{"description": f.doc}
	switch f.kind {
	case kindString:
		p = stringSchema(f.minLen, f.maxLen)
		p["description"] = f.doc
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
	return p
}

// stringSchema is a string of minLen to maxLen characters without
// leading or trailing white space.
func stringSchema(minLen, maxLen int) map[string]any {
	return map[string]any{"type": "string", "minLength": minLen, "maxLength": maxLen, "pattern": `^\S(.*\S)?$|^$`}
}

// rangeSchema is the schema of a ranged field's range object: gte, lte
// or both within the field's limits; suffix too for issue.
func (f fieldSpec) rangeSchema() map[string]any {
	lo, hi := f.unitLimits()
	bound := map[string]any{"type": "integer", "minimum": json.Number(f.display(lo)), "maximum": json.Number(f.display(hi))}
	if f.kind == kindGrade {
		bound["type"] = "number"
	}
	props := map[string]any{opGte: bound, opLte: maps.Clone(bound)}
	rng := map[string]any{"type": "object", "additionalProperties": false, "properties": props, "minProperties": 1,
		"description": "inclusive range: gte, lte or both (gte ≤ lte)"}
	if f.name == "issue" {
		rng["description"] = "inclusive range of the issue's leading number (12 of \"12A\"): gte, lte or both (gte ≤ lte); suffix, matched exactly, defaults to none"
		props[opSuffix] = stringSchema(0, 15)
		// A suffix alone is no range.
		rng["not"] = map[string]any{"required": []string{opSuffix}, "maxProperties": 1}
	}
	return rng
}

// BodyJSON is a subscription body as JSON, kept as sent (raw JSON, as
// json.RawMessage); the API publishes its exact shape (BodySchema).
type BodyJSON json.RawMessage

// MarshalJSON writes the body as it is ("null" when empty).
func (b BodyJSON) MarshalJSON() ([]byte, error) { return json.RawMessage(b).MarshalJSON() }

// UnmarshalJSON keeps a copy of the body's JSON.
func (b *BodyJSON) UnmarshalJSON(data []byte) error {
	return (*json.RawMessage)(b).UnmarshalJSON(data)
}

// OpenAPISchema is the body's schema in the API's document.
func (BodyJSON) OpenAPISchema() map[string]any { return BodySchema() }
