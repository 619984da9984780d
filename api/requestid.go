package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/gofiber/fiber/v2"
)

// HeaderRequestID carries the request id, incoming and outgoing.
const HeaderRequestID = "X-Request-Id"

// maxRequestIDLen bounds an accepted incoming request id.
const maxRequestIDLen = 128

// requestIDKey is the Locals and context key of the request id.
type requestIDKey struct{}

// RequestID returns the id of the request being handled by c ("" outside
// the middleware chain).
func RequestID(c *fiber.Ctx) string {
	id, _ := c.Locals(requestIDKey{}).(string)
	return id
}

// requestIDMiddleware assigns the request its id (see ensureRequestID).
func requestIDMiddleware(c *fiber.Ctx) error {
	ensureRequestID(c)
	return c.Next()
}

// ensureRequestID returns the request's id, assigning it first if needed:
// a sane incoming X-Request-Id is kept, anything else replaced by a random
// id. The id is stored in Locals and the user context and echoed in the
// response header. The error handler calls it too, for errors raised by the
// HTTP server before the middleware ran (413, 431, ...).
func ensureRequestID(c *fiber.Ctx) string {
	if id := RequestID(c); id != "" {
		return id
	}
	id := c.Get(HeaderRequestID)
	if saneRequestID(id) {
		id = string([]byte(id)) // c.Get aliases a buffer reused after the request
	} else {
		id = newRequestID()
	}
	c.Locals(requestIDKey{}, id)
	c.SetUserContext(context.WithValue(c.UserContext(), requestIDKey{}, id))
	c.Set(HeaderRequestID, id)
	return id
}

// saneRequestID reports whether id is 1 to 128 characters of [A-Za-z0-9._-].
func saneRequestID(id string) bool { return len(id) <= maxRequestIDLen && plainName(id) }

// newRequestID returns 32 random hex characters.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}
