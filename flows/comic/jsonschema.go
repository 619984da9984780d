package comic

import "encoding/json"

// SchemaID is the $id of the published comic schema.
const SchemaID = "/v1/schemas/comic.json"

// JSONSchema returns the comic's JSON Schema (draft 2020-12), built from
// the validator's field table, with the subscription body's in $defs: no
// field required, ranged fields a value or a range.
func JSONSchema() []byte {
	props := map[string]any{}
	bodyProps := map[string]any{}
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
		bodyProps[f.name] = map[string]any{"$ref": "#/properties/" + f.name}
		if f.ranged {
			lo, hi := f.unitLimits()
			bound := map[string]any{"type": "number", "minimum": json.Number(f.display(lo)), "maximum": json.Number(f.display(hi))}
			rng := map[string]any{"type": "object", "minProperties": 1, "additionalProperties": false,
				"description": "inclusive range: gte, lte or both (gte ≤ lte)", "properties": map[string]any{"gte": bound, "lte": bound}}
			if f.name == "issue" {
				rng["description"] = "inclusive range of the issue's leading number (12 of \"12A\"); suffix, matched exactly, defaults to none"
				rng["properties"].(map[string]any)["suffix"] = map[string]any{"type": "string", "maxLength": 15}
			}
			bodyProps[f.name] = map[string]any{"anyOf": []any{map[string]any{"$ref": "#/properties/" + f.name}, rng}}
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
			"description": "A subscription body: any subset of the comic's properties, each matched by equality (strings case-insensitively) or, for grade, issue, price_cents and year, by a range."}},
	}
	out, _ := json.MarshalIndent(doc, "", "  ")
	return out
}
