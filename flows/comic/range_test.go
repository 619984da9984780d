package comic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// rangeModel is a reference of what a subscription matches, written
// without the index: each constraint of a body is checked against the
// comic directly.
type rangeModel struct {
	subs map[string][]constraint // subscription id → its constraints
}

// constraint is one field of a subscription body: an exact value, or a
// range [lo, hi] of a number (with the issue's suffix).
type constraint struct {
	field  string
	exact  any // string, int64, float64 or bool; nil for a range
	lo, hi float64
	suffix string
}

var issueRE = regexp.MustCompile(`^([0-9]+)(.*)$`)

func fold(s string) string { return strings.Join(strings.Fields(strings.ToLower(s)), " ") }

// matches reports whether comic c meets every constraint.
func (constraint) value(c Comic, field string) any {
	return map[string]any{"grade": c.Grade, "issue": c.Issue, "key_issue": c.KeyIssue, "price_cents": c.PriceCents,
		"printing": c.Printing, "publisher": c.Publisher, "series": c.Series, "title": c.Title, "variant": c.Variant, "year": c.Year}[field]
}

func (k constraint) matches(c Comic) bool {
	v := k.value(c, k.field)
	if k.exact != nil {
		if s, ok := v.(string); ok {
			return fold(s) == fold(k.exact.(string))
		}
		return v == k.exact
	}
	var x float64
	switch n := v.(type) {
	case float64:
		x = n
	case int64:
		x = float64(n)
	case string:
		m := issueRE.FindStringSubmatch(n)
		if m == nil || fold(m[2]) != fold(k.suffix) {
			return false
		}
		x, _ = strconv.ParseFloat(m[1], 64)
	}
	return k.lo <= x && x <= k.hi
}

func (m *rangeModel) match(c Comic) []string {
	var out []string
	for id, cs := range m.subs {
		ok := true
		for _, k := range cs {
			ok = ok && k.matches(c)
		}
		if ok {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// rangeWorld draws comics and bodies from small domains, so that ranges
// overlap, share groups and often match.
type rangeWorld struct{ r *rand.Rand }

var (
	rwIssues = []string{"1", "2", "12", "12A", "12a", "7B", "100", "½"}
	rwGrades = []float64{0.5, 4.0, 8.0, 9.0, 9.2, 9.4, 9.8, 10.0}
)

func (w rangeWorld) comic() Comic {
	r := w.r
	return Comic{Grade: rwGrades[r.IntN(len(rwGrades))], Issue: rwIssues[r.IntN(len(rwIssues))], KeyIssue: r.IntN(2) == 0,
		PriceCents: int64(100 * r.IntN(20)), Printing: int64(1 + r.IntN(2)), Publisher: []string{"Marvel", "DC"}[r.IntN(2)],
		Series: []string{"X-Men", "Batman"}[r.IntN(2)], Title: "T", Year: int64(1960 + r.IntN(10))}
}

// body draws a subscription body (its JSON as a client sends it) and its
// constraints: each field with probability 1/3, a ranged one as a range
// with probability 2/3 (gte, lte or both).
func (w rangeWorld) body() (string, []constraint) {
	r := w.r
	c := w.comic()
	parts := []string{}
	var cs []constraint
	for _, f := range fields {
		if r.IntN(3) != 0 {
			continue
		}
		v := constraint{}.value(c, f.name)
		if !f.ranged || r.IntN(3) == 0 {
			raw, _ := json.Marshal(v)
			parts = append(parts, fmt.Sprintf("%q:%s", f.name, raw))
			cs = append(cs, constraint{field: f.name, exact: v})
			continue
		}
		var a, b float64
		switch f.name {
		case "grade":
			a, b = rwGrades[r.IntN(len(rwGrades))], rwGrades[r.IntN(len(rwGrades))]
		case "issue":
			a, b = float64(r.IntN(20)), float64(r.IntN(120))
		case "price_cents":
			a, b = float64(100*r.IntN(20)), float64(100*r.IntN(20))
		case "year":
			a, b = float64(1960+r.IntN(10)), float64(1960+r.IntN(10))
		}
		a, b = min(a, b), max(a, b)
		lo, hi := f.unitLimits()
		scale := map[bool]float64{true: 10, false: 1}[f.kind == kindGrade]
		k := constraint{field: f.name, lo: float64(lo) / scale, hi: float64(hi) / scale}
		var ops []string
		switch r.IntN(3) {
		case 0:
			k.lo, ops = a, []string{fmt.Sprintf(`"gte":%v`, a)}
		case 1:
			k.hi, ops = b, []string{fmt.Sprintf(`"lte":%v`, b)}
		default:
			k.lo, k.hi, ops = a, b, []string{fmt.Sprintf(`"gte":%v`, a), fmt.Sprintf(`"lte":%v`, b)}
		}
		if f.name == "issue" && r.IntN(3) == 0 {
			k.suffix = []string{"A", "b"}[r.IntN(2)]
			ops = append(ops, fmt.Sprintf(`"suffix":%q`, k.suffix))
		}
		parts = append(parts, fmt.Sprintf("%q:{%s}", f.name, strings.Join(ops, ",")))
		cs = append(cs, k)
	}
	return "{" + strings.Join(parts, ",") + "}", cs
}

// TestMatcher_RangeScriptMatchesModel creates and deletes random
// subscriptions, exact and ranged (through Create and CreateMany, with
// small shards), and requires the matcher to return exactly the model's
// subscriptions for random comics; deleting every subscription leaves no
// index key.
func TestMatcher_RangeScriptMatchesModel(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := context.Background()
			var covRange, covRejected, covSuffix, covBloated int
			rdb := be.Client(t)
			for seed := range uint64(4) {
				if err := rdb.FlushDB(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				s, _ := NewStore(rdb, StoreConfig{BloatThreshold: 4})
				w := rangeWorld{r: rand.New(rand.NewPCG(seed, 0x5a9e))}
				model := &rangeModel{subs: map[string][]constraint{}}
				var batch []NewSubscription
				var batchCons [][]constraint
				for i := range 400 {
					body, cs := w.body()
					email := fmt.Sprintf("u%d@example.com", i%97)
					if w.r.IntN(2) == 0 {
						sub, err := s.Create(ctx, email, json.RawMessage(body), "")
						if errors.Is(err, ErrDuplicate) {
							continue
						}
						if err != nil {
							t.Fatalf("seed %d: create %s: %v", seed, body, err)
						}
						model.subs[sub.ID] = cs
						continue
					}
					batch = append(batch, NewSubscription{Email: email, Body: json.RawMessage(body)})
					batchCons = append(batchCons, cs)
				}
				if _, err := s.CreateMany(ctx, batch); err != nil {
					t.Fatalf("seed %d: CreateMany: %v", seed, err)
				}
				for i, in := range batch {
					b, err := ParseBody(in.Body)
					if err != nil {
						t.Fatal(err)
					}
					model.subs[hashHex([]byte(in.Email+"\x00"+string(b.Canonical())))] = batchCons[i]
				}
				for id := range model.subs {
					if w.r.IntN(4) == 0 {
						if err := s.Delete(ctx, id); err != nil {
							t.Fatalf("seed %d: delete %s: %v", seed, id, err)
						}
						delete(model.subs, id)
					}
				}
				if bl, _ := rdb.HLen(ctx, bloatKey).Result(); bl > 0 {
					covBloated++
				}
				m := newMatcher(rdb, NewTopics(2))
				for i := range 300 {
					c := w.comic()
					before := m.Examined()
					got, err := m.MatchIDs(ctx, c)
					if err != nil {
						t.Fatal(err)
					}
					slices.Sort(got)
					want := model.match(c)
					if !slices.Equal(got, want) {
						t.Fatalf("seed %d comic %d %+v: matched %d %v\nmodel %d %v", seed, i, c, len(got), got, len(want), want)
					}
					covRejected += int(m.Examined()-before) - len(got)
					for _, id := range got {
						for _, k := range model.subs[id] {
							if k.exact == nil {
								covRange++
								if k.suffix != "" {
									covSuffix++
								}
							}
						}
					}
				}
				for id := range model.subs {
					if err := s.Delete(ctx, id); err != nil {
						t.Fatal(err)
					}
				}
				if keys, _ := rdb.Keys(ctx, indexPrefix+"*").Result(); len(keys) != 0 {
					t.Errorf("seed %d: after deleting every subscription index keys %v remain", seed, keys)
				}
			}
			t.Logf("coverage: range constraints matched %d, candidates rejected %d, suffixes matched %d, runs with bloated sets %d",
				covRange, covRejected, covSuffix, covBloated)
			if covRange == 0 || covRejected == 0 || covSuffix == 0 || covBloated == 0 {
				t.Error("the random subscriptions missed a case")
			}
		})
	}
}

// TestStore_RangeRejectsBadBodies: every malformed range is refused with
// an error naming the field and saying what is wrong.
func TestStore_RangeRejectsBadBodies(t *testing.T) {
	s, _ := NewStore(backends()[0].Client(t), StoreConfig{})
	for _, tt := range []struct{ body, field, reason string }{
		{`{"year":{"gte":1970,"lte":1960}}`, "body.year", "gte 1970 is greater than lte 1960"},
		{`{"grade":{"gte":9.8,"lte":9.0}}`, "body.grade", "gte 9.8 is greater than lte 9.0"},
		{`{"price_cents":{"lte":"400"}}`, "body.price_cents", "lte: want a number"},
		{`{"year":{"gt":1960}}`, "body.year", `unknown operator "gt", want gte, lte`},
		{`{"issue":{"from":1}}`, "body.issue", `unknown operator "from", want gte, lte or suffix`},
		{`{"year":{"gte":1800}}`, "body.year", "gte: 1800 out of range 1900..2100"},
		{`{"grade":{"lte":11}}`, "body.grade", "lte: 11 out of range 0.5..10.0"},
		{`{"issue":{"lte":100001}}`, "body.issue", "lte: 100001 out of range 0..100000"},
		{`{"price_cents":{"gte":1e12}}`, "body.price_cents", "out of range 0..1000000000"},
		{`{"grade":{"gte":9.25}}`, "body.grade", "gte: want a grade in tenths"},
		{`{"year":{"gte":1960.5}}`, "body.year", "gte: want an integer"},
		{`{"year":{}}`, "body.year", "a range needs gte, lte or both"},
		{`{"year":{"gte":1960}x}`, "body", "want a JSON object"},
		{`{"series":{"gte":1}}`, "body.series", "not a ranged field"},
		{`{"grade":{"gte":9,"suffix":"A"}}`, "body.grade", `unknown operator "suffix"`},
		{`{"issue":{"gte":1,"suffix":" A"}}`, "body.issue", "suffix: leading or trailing white space"},
		{`{"issue":{"gte":1,"suffix":"ABCDEFGHIJKLMNOP"}}`, "body.issue", "suffix: length 16 out of range 0..15"},
	} {
		_, err := s.Create(context.Background(), "a@example.com", json.RawMessage(tt.body), "")
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field || !strings.Contains(fe.Reason, tt.reason) {
			t.Errorf("Create(%s) = %v, want field %s: %s", tt.body, err, tt.field, tt.reason)
		}
	}
	// A comic is never a range.
	if _, err := ParseComic([]byte(with(t, "year", `{"gte":1960}`))); err == nil {
		t.Error("ParseComic accepted a range")
	}
}

// TestStore_RangeCanonicalFormAndPattern: a range's canonical form holds
// both bounds, so an open bound and the field's limit are one
// subscription; its pattern token names the bound it is indexed by.
func TestStore_RangeCanonicalFormAndPattern(t *testing.T) {
	ctx := context.Background()
	s, _ := NewStore(backends()[0].Client(t), StoreConfig{})
	for _, tt := range []struct{ body, canonical, pattern string }{
		{`{"grade":{"gte":9}}`, `{"grade":{"gte":9.0,"lte":10.0}}`, "grade>="},
		{`{"price_cents":{"lte":40000},"series":"X-Men"}`, `{"price_cents":{"gte":0,"lte":40000},"series":"X-Men"}`, "price_cents<=,series"},
		{`{"year":{"gte":1960,"lte":1969}}`, `{"year":{"gte":1960,"lte":1969}}`, "year>="},
		{`{"issue":{"gte":10,"lte":20,"suffix":"A"}}`, `{"issue":{"gte":10,"lte":20,"suffix":"A"}}`, "issue>="},
	} {
		sub := mustSubscribe(t, s, "a@example.com", tt.body)
		if string(sub.Body) != tt.canonical || sub.Pattern != tt.pattern {
			t.Errorf("%s: body %s pattern %s, want %s and %s", tt.body, sub.Body, sub.Pattern, tt.canonical, tt.pattern)
		}
		if _, err := s.Create(ctx, "a@example.com", json.RawMessage(tt.canonical), ""); !errors.Is(err, ErrDuplicate) {
			t.Errorf("canonical form of %s = %v, want ErrDuplicate", tt.body, err)
		}
	}
}
