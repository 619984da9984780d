package api

import (
	"context"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/internal/tenancy"
)

// Defaults of list routes' paging.
const (
	DefaultPageLimit = 100  // a page's size when the query gives no limit.
	MaxPageLimit     = 1000 // bounds the limit a query may ask for.
	MaxCursorLen     = 512  // bounds a cursor a query may give.
)

// Page is the JSON body of a list route: exactly the limit asked for when
// that many follow, and NextCursor, given back as ?cursor= for the next
// page, until the last page (none).
type Page[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// PageQuery reads a list route's ?cursor= (at most MaxCursorLen bytes) and
// ?limit= (1..MaxPageLimit, default DefaultPageLimit): 400
// "invalid_cursor" or "invalid_limit" otherwise.
func PageQuery(c *fiber.Ctx) (cursor string, limit int, err error) {
	limit, err = IntQuery(c, "limit", DefaultPageLimit, 1, MaxPageLimit)
	if err != nil {
		return "", 0, err
	}
	cursor = c.Query("cursor")
	if len(cursor) > MaxCursorLen {
		return "", 0, BadRequest("invalid_cursor", "cursor must be a next_cursor of this list")
	}
	return cursor, limit, nil
}

// ListAll answers a list route with the page, by key, of the whole list
// all returns: ?cursor= and ?limit= as [PageQuery] reads them, checked
// before all is called; see [PageOf].
func ListAll[T any](c *fiber.Ctx, key func(T) string, all func() ([]T, error)) error {
	cursor, limit, err := PageQuery(c)
	if err != nil {
		return err
	}
	items, err := all()
	if err != nil {
		return err
	}
	return c.JSON(PageOf(items, key, cursor, limit))
}

// ListPage answers a list route with the page list returns for the
// caller's View, ?cursor= and ?limit= (1..MaxPageLimit, default
// DefaultPageLimit); no items is an empty list. A list error wrapping
// badCursor is 400 "invalid_cursor".
func ListPage[T any](c *fiber.Ctx, badCursor error, list func(context.Context, tenancy.View, string, int) ([]T, string, error)) error {
	limit, err := IntQuery(c, "limit", DefaultPageLimit, 1, MaxPageLimit)
	if err != nil {
		return err
	}
	items, next, err := list(c.UserContext(), View(c), c.Query("cursor"), limit)
	if err != nil {
		return MapError(err, When(badCursor, BadRequest("invalid_cursor", "")))
	}
	if items == nil {
		items = []T{}
	}
	return c.JSON(Page[T]{Items: items, NextCursor: next})
}

// PageOf returns the page of items after cursor ("" for the first) in the
// order of key (unique per item), exactly limit of them when that many
// follow, with the cursor of the next page ("" on the last): the paging
// of a list held whole in memory. items is not changed.
func PageOf[T any](items []T, key func(T) string, cursor string, limit int) Page[T] {
	sorted := slices.Clone(items)
	slices.SortStableFunc(sorted, func(a, b T) int { return strings.Compare(key(a), key(b)) })
	start := 0
	if cursor != "" {
		start, _ = slices.BinarySearchFunc(sorted, cursor, func(it T, c string) int { return strings.Compare(key(it), c) })
		for start < len(sorted) && key(sorted[start]) <= cursor {
			start++
		}
	}
	end := min(len(sorted), start+max(limit, 1))
	page := Page[T]{Items: append([]T{}, sorted[start:end]...)}
	if end < len(sorted) {
		page.NextCursor = key(sorted[end-1])
	}
	return page
}
