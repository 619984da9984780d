package comic

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const validComic = `{"publisher":"Marvel","series":"The Amazing Spider-Man","title":"The Night Gwen Stacy Died",
"issue":"121","year":1973,"grade":9.4,"variant":"","printing":1,"key_issue":true,"price_cents":250000}`

// with returns validComic with field set to the raw JSON value (or removed
// when raw is "").
func with(t *testing.T, field, raw string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(validComic), &m); err != nil {
		t.Fatal(err)
	}
	if raw == "" {
		delete(m, field)
	} else {
		m[field] = json.RawMessage(raw)
	}
	out, _ := json.Marshal(m)
	return string(out)
}

func TestParseComic_validationTable(t *testing.T) {
	tests := []struct {
		name, doc, field string // field "" and doc valid: no error
	}{
		{"valid", validComic, ""},
		{"grade 10.0", with(t, "grade", "10.0"), ""},
		{"grade 0.5", with(t, "grade", "0.5"), ""},
		{"optional fields default", with(t, "variant", ""), ""},
		{"printing omitted", with(t, "printing", ""), ""},
		{"unicode title", with(t, "title", `"Spider-Man ½ — 日本"`), ""},
		{"unknown field", with(t, "condition", `"mint"`), "condition"},
		{"grade below range", with(t, "grade", "0.4"), "grade"},
		{"grade above range", with(t, "grade", "10.5"), "grade"},
		{"grade not on the CGC scale", with(t, "grade", "9.3"), "grade"},
		{"grade as string", with(t, "grade", `"9.4"`), "grade"},
		{"year too old", with(t, "year", "1899"), "year"},
		{"year too new", with(t, "year", "2101"), "year"},
		{"year fractional", with(t, "year", "1973.5"), "year"},
		{"year as string", with(t, "year", `"1973"`), "year"},
		{"printing zero", with(t, "printing", "0"), "printing"},
		{"printing too high", with(t, "printing", "100"), "printing"},
		{"negative price", with(t, "price_cents", "-1"), "price_cents"},
		{"price too high", with(t, "price_cents", "1000000001"), "price_cents"},
		{"price float", with(t, "price_cents", "12.5"), "price_cents"},
		{"key_issue as string", with(t, "key_issue", `"true"`), "key_issue"},
		{"key_issue as number", with(t, "key_issue", `1`), "key_issue"},
		{"publisher empty", with(t, "publisher", `""`), "publisher"},
		{"publisher too long", with(t, "publisher", `"`+strings.Repeat("x", 101)+`"`), "publisher"},
		{"publisher number", with(t, "publisher", `7`), "publisher"},
		{"series null", with(t, "series", `null`), "series"},
		{"title with control character", with(t, "title", `"a\u0007b"`), "title"},
		{"title with trailing space", with(t, "title", `"abc "`), "title"},
		{"issue too long", with(t, "issue", `"`+strings.Repeat("1", 17)+`"`), "issue"},
		{"variant too long", with(t, "variant", `"`+strings.Repeat("v", 101)+`"`), "variant"},
		{"missing publisher", with(t, "publisher", ""), "publisher"},
		{"missing grade", with(t, "grade", ""), "grade"},
		{"missing price", with(t, "price_cents", ""), "price_cents"},
		{"not an object", `[1,2]`, "-"},
		{"trailing data", validComic + `{}`, "-"},
		{"too large", `{"title":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseComic([]byte(tt.doc))
			if tt.field == "" {
				if err != nil {
					t.Fatalf("ParseComic = %v, want valid", err)
				}
				return
			}
			var fe *FieldError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) {
				t.Fatalf("ParseComic = %v, want a FieldError", err)
			}
			want := tt.field
			if want == "-" {
				want = ""
			}
			if fe.Field != want {
				t.Errorf("error names field %q (%v), want %q", fe.Field, err, want)
			}
			if want != "" && !strings.Contains(err.Error(), want) {
				t.Errorf("message %q does not name %q", err, want)
			}
		})
	}
}

func TestComic_canonicalFormIsTheIdentity(t *testing.T) {
	a, err := ParseComic([]byte(validComic))
	if err != nil {
		t.Fatal(err)
	}
	// Same comic: other key order, white space, defaults omitted, 9.40.
	b, err := ParseComic([]byte(`{ "year":1973, "price_cents":250000, "key_issue":true, "grade":9.40,
		"title":"The Night Gwen Stacy Died", "issue":"121", "series":"The Amazing Spider-Man", "publisher":"Marvel" }`))
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Canonical()) != string(b.Canonical()) || a.ID() != b.ID() {
		t.Fatalf("canonical forms differ:\n%s\n%s", a.Canonical(), b.Canonical())
	}
	want := `{"grade":9.4,"issue":"121","key_issue":true,"price_cents":250000,"printing":1,"publisher":"Marvel",` +
		`"series":"The Amazing Spider-Man","title":"The Night Gwen Stacy Died","variant":"","year":1973}`
	if got := string(a.Canonical()); got != want {
		t.Errorf("canonical = %s\nwant        %s", got, want)
	}
	// The canonical form parses back to the same comic.
	c, err := ParseComic(a.Canonical())
	if err != nil || c != a {
		t.Errorf("round trip = %+v, %v; want %+v", c, err, a)
	}
	other := a
	other.Grade = 9.6
	if other.ID() == a.ID() || len(a.ID()) != 32 {
		t.Errorf("ids %s and %s: want distinct 32-digit ids", a.ID(), other.ID())
	}
}

func TestBody_patternIsTheSortedFieldNamesForAllSubsets(t *testing.T) {
	c, err := ParseComic([]byte(validComic))
	if err != nil {
		t.Fatal(err)
	}
	full := c.Body()
	names := FieldNames()
	seen := map[string]bool{}
	for mask := 0; mask < 1<<len(names); mask++ {
		b := Body{}
		var want []string
		for i := len(names) - 1; i >= 0; i-- { // insert in reverse order
			if mask&(1<<i) != 0 {
				b[names[i]] = full[names[i]]
			}
		}
		for i, n := range names {
			if mask&(1<<i) != 0 {
				want = append(want, n)
			}
		}
		p := b.Pattern()
		if p != strings.Join(want, ",") || seen[p] {
			t.Fatalf("mask %b: pattern %q, want %q once", mask, p, strings.Join(want, ","))
		}
		seen[p] = true
		parsed, err := ParseBody(b.Canonical())
		if err != nil || parsed.Pattern() != p {
			t.Fatalf("mask %b: canonical body %s does not parse back: %v", mask, b.Canonical(), err)
		}
	}
	if len(seen) != 1<<len(names) {
		t.Errorf("%d patterns, want %d", len(seen), 1<<len(names))
	}
}

func TestIndexValue_stringsMatchCaseInsensitively(t *testing.T) {
	a := Body{"series": "The Amazing  Spider-Man"}
	b := Body{"series": "the amazing spider-man"}
	if valuesHash(a, []string{"series"}) != valuesHash(b, []string{"series"}) {
		t.Error("series differing in case and spaces hash differently")
	}
	if valuesHash(Body{"grade": 9.0}, []string{"grade"}) == valuesHash(Body{"grade": 9.2}, []string{"grade"}) {
		t.Error("grades 9.0 and 9.2 hash alike")
	}
}

func TestJSONSchema_describesEveryField(t *testing.T) {
	var doc struct {
		Properties           map[string]map[string]any `json:"properties"`
		Required             []string                  `json:"required"`
		AdditionalProperties bool                      `json:"additionalProperties"`
	}
	if err := json.Unmarshal(JSONSchema(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Properties) != len(fields) || doc.AdditionalProperties {
		t.Fatalf("schema has %d properties (additional %v), want %d and none", len(doc.Properties), doc.AdditionalProperties, len(fields))
	}
	for _, f := range fields {
		if doc.Properties[f.name]["type"] == nil {
			t.Errorf("property %s has no type", f.name)
		}
	}
	if strings.Join(doc.Required, ",") != "grade,issue,price_cents,publisher,series,title,year" {
		t.Errorf("required = %v", doc.Required)
	}
}

// TestJSONSchema_RangeInTheSubscriptionBody: the subscription body's
// schema lets exactly the ranged fields be a range, with their limits.
func TestJSONSchema_RangeInTheSubscriptionBody(t *testing.T) {
	var doc struct {
		Defs struct {
			Body struct {
				Properties map[string]struct {
					AnyOf []struct {
						Properties map[string]map[string]any `json:"properties"`
					} `json:"anyOf"`
				} `json:"properties"`
			} `json:"subscriptionBody"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(JSONSchema(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		p := doc.Defs.Body.Properties[f.name]
		if ranged := len(p.AnyOf) == 2; ranged != f.ranged {
			t.Errorf("body property %s: range allowed %v, want %v", f.name, ranged, f.ranged)
		}
	}
	year := doc.Defs.Body.Properties["year"].AnyOf[1].Properties["gte"]
	if year["minimum"] != float64(MinYear) || year["maximum"] != float64(MaxYear) {
		t.Errorf("year range bound %v, want %d..%d", year, MinYear, MaxYear)
	}
}

func FuzzParseBody(f *testing.F) {
	f.Add([]byte(validComic))
	f.Add([]byte(`{"grade":9.8}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"grade":{"gte":9},"issue":{"lte":12,"suffix":"A"},"price_cents":{"gte":0,"lte":40000},"year":{"gte":1960}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		b, err := ParseBody(raw)
		if err != nil {
			return
		}
		again, err := ParseBody(b.Canonical())
		if err != nil || string(again.Canonical()) != string(b.Canonical()) {
			t.Fatalf("canonical %s does not round-trip: %v", b.Canonical(), err)
		}
	})
}
