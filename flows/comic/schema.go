package comic

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dropstream/dropstream/internal/clip"
)

// Limits of the comic schema.
const (
	// MaxBodyBytes bounds a comic or a subscription body as JSON.
	MaxBodyBytes = 8 << 10
	// MinYear and MaxYear bound Comic.Year.
	MinYear, MaxYear = 1900, 2100
	// MaxPrintings bounds Comic.Printing.
	MaxPrintings = 99
	// MaxPriceCents bounds Comic.PriceCents (ten million dollars).
	MaxPriceCents = 1_000_000_000
)

// ErrInvalid is wrapped by every validation error, a *FieldError.
var ErrInvalid = errors.New("comic: invalid")

// FieldError names the field at fault and why.
type FieldError struct {
	// Field is the JSON name of the field ("" for the document itself).
	Field  string
	Reason string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return "comic: " + e.Reason
	}
	return "field " + e.Field + ": " + e.Reason
}

// Unwrap makes every FieldError match ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Comic is a comic book for sale. Its fields are in the order of their
// JSON names, so its JSON is the canonical form (see ID).
type Comic struct {
	// Grade is the CGC grade, one of CGCGrades (0.5 to 10.0).
	Grade float64 `json:"grade"`
	// Issue is the issue number as printed ("1", "129", "½", "1A").
	Issue string `json:"issue"`
	// KeyIssue marks a key issue (first appearance, origin, ...).
	KeyIssue bool `json:"key_issue" openapi:"optional"`
	// PriceCents is the asking price in cents, 0 to MaxPriceCents.
	PriceCents int64 `json:"price_cents"`
	// Printing is the printing, 1 (first printing) to MaxPrintings.
	Printing int64 `json:"printing" openapi:"optional"`
	// Publisher, Series, Title and Variant are free text; Variant may be empty.
	Publisher string `json:"publisher"`
	Series    string `json:"series"`
	Title     string `json:"title"`
	Variant   string `json:"variant" openapi:"optional"`
	// Year is the cover year, MinYear to MaxYear.
	Year int64 `json:"year"`
}

// CGCGrades are the grades of the CGC scale.
var CGCGrades = []float64{0.5, 1.0, 1.5, 1.8, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 5.5, 6.0, 6.5,
	7.0, 7.5, 8.0, 8.5, 9.0, 9.2, 9.4, 9.6, 9.8, 9.9, 10.0}

// fieldKind is the JSON type of a field.
type fieldKind int

const (
	kindString fieldKind = iota
	kindInt
	kindGrade
	kindBool
)

// fieldSpec is one field of the schema, for the validator, the JSON
// Schema and the index.
type fieldSpec struct {
	name     string
	kind     fieldKind
	minLen   int // strings
	maxLen   int
	min, max int64 // integers
	required bool  // in a full comic; optional fields take def
	ranged   bool  // a subscription body may give it a Range
	def      any
	doc      string
}

// fields are the schema's fields in alphabetical order.
var fields = []fieldSpec{
	{name: "grade", kind: kindGrade, required: true, ranged: true, doc: "CGC grade, one of the CGC scale from 0.5 to 10.0"},
	{name: "issue", kind: kindString, minLen: 1, maxLen: 16, required: true, ranged: true, doc: "issue number as printed"},
	{name: "key_issue", kind: kindBool, def: false, doc: "a key issue (first appearance, origin, death, ...)"},
	{name: "price_cents", kind: kindInt, min: 0, max: MaxPriceCents, required: true, ranged: true, doc: "asking price in cents"},
	{name: "printing", kind: kindInt, min: 1, max: MaxPrintings, def: int64(1), doc: "printing, 1 for the first"},
	{name: "publisher", kind: kindString, minLen: 1, maxLen: 100, required: true, doc: "publisher"},
	{name: "series", kind: kindString, minLen: 1, maxLen: 200, required: true, doc: "series"},
	{name: "title", kind: kindString, minLen: 1, maxLen: 200, required: true, doc: "story or cover title"},
	{name: "variant", kind: kindString, minLen: 0, maxLen: 100, def: "", doc: "cover variant, empty for the regular cover"},
	{name: "year", kind: kindInt, min: MinYear, max: MaxYear, required: true, ranged: true, doc: "cover year"},
}

func specOf(name string) (fieldSpec, bool) {
	i, ok := slices.BinarySearchFunc(fields, name, func(f fieldSpec, n string) int { return strings.Compare(f.name, n) })
	if !ok {
		return fieldSpec{}, false
	}
	return fields[i], true
}

// Body is a validated partial comic: field name to string, int64, float64
// (grade) or bool; in a subscription body a ranged field may be a Range.
type Body map[string]any

// ParseComic strictly decodes a full comic, defaulting optional fields;
// errors wrap ErrInvalid (a *FieldError).
func ParseComic(raw []byte) (Comic, error) {
	b, err := parseBody(raw, false)
	if err != nil {
		return Comic{}, err
	}
	for _, f := range fields {
		if _, ok := b[f.name]; !ok {
			if f.required {
				return Comic{}, &FieldError{Field: f.name, Reason: "required"}
			}
			b[f.name] = f.def
		}
	}
	var c Comic
	err = json.Unmarshal(b.Canonical(), &c) // the validated values, with their JSON names
	return c, err
}

// ParseBody decodes and validates a subscription body: ParseComic's rules,
// but no field required, and ranged fields may be a Range.
func ParseBody(raw []byte) (Body, error) { return parseBody(raw, true) }

func parseBody(raw []byte, ranges bool) (Body, error) {
	if len(raw) > MaxBodyBytes {
		return nil, &FieldError{Reason: fmt.Sprintf("document of %d bytes exceeds %d", len(raw), MaxBodyBytes)}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, &FieldError{Reason: "want a JSON object"}
	}
	if dec.More() {
		return nil, &FieldError{Reason: "data after the JSON object"}
	}
	b := make(Body, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		spec, ok := specOf(name)
		if !ok {
			return nil, &FieldError{Field: clipName(name), Reason: "unknown field"}
		}
		var v any
		var err error
		switch {
		case ranges && isRangeStart(m[name]) && spec.ranged:
			v, err = spec.parseRange(m[name])
		case ranges && isRangeStart(m[name]):
			err = errors.New("not a ranged field: ranges apply to grade, issue, price_cents and year")
		default:
			v, err = spec.parse(m[name])
		}
		if err != nil {
			return nil, &FieldError{Field: name, Reason: err.Error()}
		}
		b[name] = v
	}
	return b, nil
}

// ValidateComic checks a Comic built in Go against the schema.
func ValidateComic(c Comic) error {
	raw, _ := json.Marshal(c)
	_, err := ParseComic(raw)
	return err
}

func (f fieldSpec) parse(raw json.RawMessage) (any, error) {
	raw = bytes.TrimSpace(raw)
	switch f.kind {
	case kindBool:
		switch string(raw) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, errors.New("want a boolean")
	case kindString:
		var s string
		if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return nil, errors.New("want a string")
		}
		if s != strings.TrimSpace(s) {
			return nil, errors.New("leading or trailing white space")
		}
		n := utf8.RuneCountInString(s)
		if n < f.minLen || n > f.maxLen {
			return nil, fmt.Errorf("length %d out of range %d..%d", n, f.minLen, f.maxLen)
		}
		for _, r := range s {
			if unicode.IsControl(r) || r == utf8.RuneError {
				return nil, errors.New("control or invalid characters")
			}
		}
		return s, nil
	case kindInt:
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return nil, errors.New("want an integer")
		}
		if n < f.min || n > f.max {
			return nil, fmt.Errorf("%d out of range %d..%d", n, f.min, f.max)
		}
		return n, nil
	case kindGrade:
		g, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || len(raw) == 0 || raw[0] == '"' {
			return nil, errors.New("want a number")
		}
		if g < 0.5 || g > 10 {
			return nil, fmt.Errorf("%g out of range 0.5..10.0", g)
		}
		for _, c := range CGCGrades {
			if math.Abs(c-g) < 1e-9 {
				return c, nil
			}
		}
		return nil, fmt.Errorf("%g is not a CGC grade", g)
	}
	return nil, errors.New("unknown kind")
}

// clipName makes input quoted in an error printable: at most 64 bytes,
// control characters and invalid UTF-8 as '?'.
func clipName(s string) string {
	return strings.ToValidUTF8(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, clip.String(s, 64)), "?")
}

// Body returns the comic as a full Body.
func (c Comic) Body() Body {
	return Body{"grade": c.Grade, "issue": c.Issue, "key_issue": c.KeyIssue, "price_cents": c.PriceCents,
		"printing": c.Printing, "publisher": c.Publisher, "series": c.Series, "title": c.Title,
		"variant": c.Variant, "year": c.Year}
}

// Canonical returns the body's JSON with sorted keys, no white space and
// grades as the shortest decimal.
func (b Body) Canonical() []byte {
	out, _ := json.Marshal(map[string]any(b)) // map keys are sorted by encoding/json
	return out
}

// Canonical returns the comic's alphabetized JSON form.
func (c Comic) Canonical() []byte { return c.Body().Canonical() }

// ID returns the comic's identity: the first 128 bits of the SHA-256 of
// its canonical form, in hex.
func (c Comic) ID() string { return hashHex(c.Canonical()) }

func hashHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

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
