package comic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// MaxIssueNumber bounds an issue range; a larger issue compares as
// MaxIssueNumber+1.
const MaxIssueNumber = 100_000

// Range is a range filter of a subscription body: a comic's value v of a
// ranged field (grade, issue, price_cents, year) matches when Lo ≤ v ≤ Hi,
// in index units (grades in tenths, the issue's leading number). An open
// bound is the field's limit.
type Range struct {
	Lo, Hi int64
	// Suffix is, for issue, what follows the number ("A" of "12A"),
	// matched case-insensitively.
	Suffix string
	grade  bool
}

const (
	// Range operators.
	opGte, opLte, opSuffix = "gte", "lte", "suffix"
	// Pattern tokens of a range indexed by its lower bound (>=) or, when
	// it has only that, its upper one (<=).
	tokLo, tokHi = ">=", "<="
)

// MarshalJSON writes the canonical range: both bounds, the suffix when set.
func (r Range) MarshalJSON() ([]byte, error) {
	f := func(n int64) string { return strconv.FormatInt(n, 10) }
	if r.grade {
		f = func(n int64) string { return strconv.FormatFloat(float64(n)/10, 'f', 1, 64) }
	}
	out := `{"gte":` + f(r.Lo) + `,"lte":` + f(r.Hi)
	if r.Suffix != "" {
		s, _ := json.Marshal(r.Suffix)
		out += `,"suffix":` + string(s)
	}
	return []byte(out + "}"), nil
}

// String is the range as field statistics show it.
func (r Range) String() string {
	b, _ := r.MarshalJSON()
	return string(b)
}

// unitLimits returns the lowest and highest index value of a ranged field.
func (f fieldSpec) unitLimits() (int64, int64) {
	switch {
	case f.kind == kindGrade:
		return 5, 100
	case f.name == "issue":
		return 0, MaxIssueNumber
	}
	return f.min, f.max
}

// parseRange decodes {"gte": x, "lte": y} (either or both; "suffix" for
// issue) within the field's limits.
func (f fieldSpec) parseRange(raw json.RawMessage) (Range, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil {
		return Range{}, errors.New("want a range object such as {\"gte\": x, \"lte\": y}")
	}
	lo, hi := f.unitLimits()
	r := Range{Lo: lo, Hi: hi, grade: f.kind == kindGrade}
	bounds := 0
	for _, op := range slices.Sorted(maps.Keys(m)) {
		switch {
		case op == opSuffix && f.name == "issue":
			s, err := fieldSpec{kind: kindString, maxLen: 15}.parse(m[op])
			if err != nil {
				return Range{}, fmt.Errorf("suffix: %w", err)
			}
			r.Suffix = s.(string)
			continue
		case op != opGte && op != opLte:
			want := "gte, lte"
			if f.name == "issue" {
				want += " or suffix"
			}
			return Range{}, fmt.Errorf("unknown operator %q, want %s", clipName(op), want)
		}
		v, err := f.parseBound(m[op], lo, hi)
		if err != nil {
			return Range{}, fmt.Errorf("%s: %w", op, err)
		}
		if op == opGte {
			r.Lo = v
		} else {
			r.Hi = v
		}
		bounds++
	}
	if bounds == 0 {
		return Range{}, errors.New("a range needs gte, lte or both")
	}
	if r.Lo > r.Hi {
		return Range{}, fmt.Errorf("gte %s is greater than lte %s", f.display(r.Lo), f.display(r.Hi))
	}
	return r, nil
}

// parseBound reads one bound in index units, within lo..hi.
func (f fieldSpec) parseBound(raw json.RawMessage, lo, hi int64) (int64, error) {
	raw = bytes.TrimSpace(raw)
	x, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || len(raw) == 0 || raw[0] == '"' {
		return 0, errors.New("want a number")
	}
	if f.kind == kindGrade {
		x *= 10
	}
	if x != math.Trunc(x) && math.Abs(x-math.Round(x)) > 1e-6 {
		if f.kind == kindGrade {
			return 0, errors.New("want a grade in tenths")
		}
		return 0, errors.New("want an integer")
	}
	n := int64(math.Round(x))
	if x < float64(lo)-1e-6 || x > float64(hi)+1e-6 {
		return 0, fmt.Errorf("%s out of range %s..%s", bytes.TrimSpace(raw), f.display(lo), f.display(hi))
	}
	return n, nil
}

// display writes an index value as the field's JSON would.
func (f fieldSpec) display(n int64) string {
	if f.kind == kindGrade {
		return strconv.FormatFloat(float64(n)/10, 'f', 1, 64)
	}
	return strconv.FormatInt(n, 10)
}

// issueNumber splits an issue into its leading number (at most
// MaxIssueNumber+1) and its index suffix; ok is false without a number.
func issueNumber(issue string) (n int64, suffix string, ok bool) {
	i := strings.IndexFunc(issue, func(r rune) bool { return r < '0' || r > '9' })
	if i < 0 {
		i = len(issue)
	}
	if i == 0 {
		return 0, "", false
	}
	n, err := strconv.ParseInt(issue[:i], 10, 64)
	if err != nil || n > MaxIssueNumber {
		n = MaxIssueNumber + 1
	}
	return n, indexValue(issue[i:]), true
}

// unitValue is a comic's value of a ranged field in index units; ok is
// false when it has none.
func unitValue(b Body, field string) (int64, bool) {
	switch v := b[field].(type) {
	case float64:
		return int64(math.Round(v * 10)), true
	case int64:
		return v, true
	case string:
		n, _, ok := issueNumber(v)
		return n, ok
	}
	return 0, false
}

// splitToken returns a pattern token's field and range side ("": exact).
func splitToken(tok string) (field, side string) {
	if strings.HasSuffix(tok, tokLo) || strings.HasSuffix(tok, tokHi) {
		return tok[:len(tok)-2], tok[len(tok)-2:]
	}
	return tok, ""
}

// rangeTokens returns a pattern's ranged tokens, in order.
func rangeTokens(toks []string) []string {
	var out []string
	for _, t := range toks {
		if _, side := splitToken(t); side != "" {
			out = append(out, t)
		}
	}
	return out
}

// indexEntry returns a subscription's index member and score: its id and
// "" for an exact pattern, else the id and "|lo:hi" per ranged field,
// scored by the first one's indexed bound.
func indexEntry(id string, b Body, toks []string) (member, score string) {
	rt := rangeTokens(toks)
	if len(rt) == 0 {
		return id, ""
	}
	var sb strings.Builder
	sb.WriteString(id)
	for i, t := range rt {
		field, side := splitToken(t)
		r, _ := b[field].(Range)
		fmt.Fprintf(&sb, "|%d:%d", r.Lo, r.Hi)
		if i == 0 && side == tokLo {
			score = strconv.FormatInt(r.Lo, 10)
		} else if i == 0 {
			score = strconv.FormatInt(r.Hi, 10)
		}
	}
	return sb.String(), score
}

// rangeQuery is a comic's lookup of a ranged pattern: the score bounds to
// read and the comic's value of each ranged field.
type rangeQuery struct {
	min, max string
	values   []int64
}

// queryOf returns comic b's lookup in pattern toks (nil: exact); ok is
// false when b cannot match it.
func queryOf(b Body, toks []string) (q *rangeQuery, ok bool) {
	rt := rangeTokens(toks)
	if len(rt) == 0 {
		return nil, true
	}
	q = &rangeQuery{min: "-inf", max: "+inf"}
	for i, t := range rt {
		field, side := splitToken(t)
		x, ok := unitValue(b, field)
		if !ok {
			return nil, false
		}
		q.values = append(q.values, x)
		if i == 0 && side == tokLo {
			q.max = strconv.FormatInt(x, 10)
		} else if i == 0 {
			q.min = strconv.FormatInt(x, 10)
		}
	}
	return q, true
}

// matches returns a member's id and whether its ranges hold q's values.
func (q *rangeQuery) matches(member string) (string, bool) {
	id, rest, _ := strings.Cut(member, "|")
	for _, x := range q.values {
		var span string
		span, rest, _ = strings.Cut(rest, "|")
		l, h, _ := strings.Cut(span, ":")
		lo, err1 := strconv.ParseInt(l, 10, 64)
		hi, err2 := strconv.ParseInt(h, 10, 64)
		if err1 != nil || err2 != nil || x < lo || x > hi {
			return id, false
		}
	}
	return id, true
}

// isRangeStart reports whether a body value's JSON is an object (a range).
func isRangeStart(raw json.RawMessage) bool {
	raw = bytes.TrimLeftFunc(raw, unicode.IsSpace)
	return len(raw) > 0 && raw[0] == '{'
}

// Pattern returns the body's SearchPattern: its field names (a ranged
// one as name>= with a lower bound, name<= otherwise), sorted and joined
// with ",". The empty body has the empty pattern (every comic).
func (b Body) Pattern() string {
	names := make([]string, 0, len(b))
	for k, v := range b {
		if r, ok := v.(Range); ok {
			spec, _ := specOf(k)
			side := tokHi
			if lo, _ := spec.unitLimits(); r.Lo > lo {
				side = tokLo
			}
			k += side
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
