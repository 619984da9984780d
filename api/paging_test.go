package api

import (
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/gofiber/fiber/v2"
)

func TestPageOf_exactPagesEachItemOnce(t *testing.T) {
	items := []string{"e", "a", "d", "b", "c", "g", "f"}
	for _, limit := range []int{1, 2, 3, 7, 10} {
		t.Run(strconv.Itoa(limit), func(t *testing.T) {
			var got []string
			cursor := ""
			for range 20 {
				p := PageOf(items, func(s string) string { return s }, cursor, limit)
				if p.NextCursor != "" && len(p.Items) != limit {
					t.Fatalf("page %v of limit %d is short with more to come", p.Items, limit)
				}
				got = append(got, p.Items...)
				if cursor = p.NextCursor; cursor == "" {
					break
				}
			}
			if want := []string{"a", "b", "c", "d", "e", "f", "g"}; !slices.Equal(got, want) {
				t.Fatalf("walked %v, want %v", got, want)
			}
		})
	}
	if p := PageOf([]string{}, func(s string) string { return s }, "", 5); p.Items == nil || p.NextCursor != "" {
		t.Fatalf("empty list: %+v, want empty items and no cursor", p)
	}
	if p := PageOf(items, func(s string) string { return s }, "cc", 2); !slices.Equal(p.Items, []string{"d", "e"}) {
		t.Fatalf("after a cursor between items: %v, want [d e]", p.Items)
	}
}

func TestPageQuery_rejectsBadLimitsAndCursors(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	s.Group("/v1", ScopeRead).Get("/things", func(c *fiber.Ctx) error {
		cursor, limit, err := PageQuery(c)
		if err != nil {
			return err
		}
		return c.JSON(map[string]any{"cursor": cursor, "limit": limit})
	})
	long := make([]byte, MaxCursorLen+1)
	for i := range long {
		long[i] = 'x'
	}
	for _, tc := range []struct {
		query, code string
	}{{"limit=abc", "invalid_limit"}, {"limit=0", "invalid_limit"}, {"limit=1001", "invalid_limit"}, {"limit=1.5", "invalid_limit"},
		{"cursor=" + string(long), "invalid_cursor"}} {
		wantEnvelope(t, get(t, s, "/v1/things?"+tc.query), http.StatusBadRequest, tc.code)
	}
	if r := get(t, s, "/v1/things?limit=1000&cursor=abc"); r.status != 200 {
		t.Fatalf("a valid page query: %d %s", r.status, r.body)
	}
}
