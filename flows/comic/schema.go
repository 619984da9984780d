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
	return b.comic(), nil
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

func (b Body) comic() Comic {
	var c Comic
	c.Grade, _ = b["grade"].(float64)
	c.Issue, _ = b["issue"].(string)
	c.KeyIssue, _ = b["key_issue"].(bool)
	c.PriceCents, _ = b["price_cents"].(int64)
	c.Printing, _ = b["printing"].(int64)
	c.Publisher, _ = b["publisher"].(string)
	c.Series, _ = b["series"].(string)
	c.Title, _ = b["title"].(string)
	c.Variant, _ = b["variant"].(string)
	c.Year, _ = b["year"].(int64)
	return c
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

// Pattern returns the body's SearchPattern: its field names (a ranged
// one as its rangeToken), sorted and joined with ",". The empty body has
// the empty pattern (every comic).
func (b Body) Pattern() string {
	names := make([]string, 0, len(b))
	for k, v := range b {
		if r, ok := v.(Range); ok {
			k = rangeToken(k, r)
		}
		names = append(names, k)
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// indexValue is a field's value as the index compares it: strings
// case-folded with white space collapsed, numbers in decimal.
func indexValue(v any) string {
	switch x := v.(type) {
	case string:
		return strings.Join(strings.Fields(strings.ToLower(x)), " ")
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'f', 1, 64)
	case bool:
		return strconv.FormatBool(x)
	case Range:
		return x.String()
	}
	return fmt.Sprint(v)
}

// valuesHash identifies b's exact values of a pattern's tokens; of a
// ranged field only the issue's suffix counts.
func valuesHash(b Body, names []string) string {
	var sb strings.Builder
	for _, n := range names {
		field, side := splitToken(n)
		v := indexValue(b[n])
		switch x := b[field].(type) {
		case Range:
			v = indexValue(x.Suffix)
		case string:
			if side != "" {
				_, v, _ = issueNumber(x)
			}
		}
		if side != "" && field != "issue" {
			continue
		}
		sb.WriteString(n)
		sb.WriteByte(0)
		sb.WriteString(v)
		sb.WriteByte(0)
	}
	return hashHex([]byte(sb.String()))
}

// splitPattern returns a pattern's field names.
func splitPattern(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p, ",")
}
