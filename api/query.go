package api

import (
	"strconv"

	"github.com/gofiber/fiber/v2"
)

// IntQuery parses the optional integer query parameter name within
// [lo, hi]: def when it is absent, a 400 "invalid_<name>" when it is not a
// whole number in range.
func IntQuery(c *fiber.Ctx, name string, def, lo, hi int) (int, error) {
	s := c.Query(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, BadRequest("invalid_"+name, name+" must be a whole number in "+strconv.Itoa(lo)+".."+strconv.Itoa(hi))
	}
	return n, nil
}
