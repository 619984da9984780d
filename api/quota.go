package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/internal/quota"
)

// QuotaExceeded returns the 409 "quota_exceeded" *Error of a create that
// would take the caller's tenant (see [Tenant]) beyond its cap of stored objects of
// a kind; msg names the kind and the cap.
func QuotaExceeded(msg string) *Error {
	return NewError(http.StatusConflict, "quota_exceeded", msg)
}

// Reserve holds one slot of the caller's tenant's cap q for an object a create
// route is about to store. The route then calls Keep with the object's id
// once stored (a replace frees the slot again), or Drop when it stored
// nothing new. A caller at its cap gets the 409 "quota_exceeded" *Error,
// naming kind and the cap. A nil q (no cap) reserves nothing and succeeds.
func Reserve(c *fiber.Ctx, q *quota.Quota, kind string) (*quota.Reservation, error) {
	r, err := q.Reserve(c.UserContext(), Tenant(c))
	return r, exceeded(q, kind, err)
}

// ReserveFor is Reserve for an object whose id the caller chose: replacing
// an object that counts already needs no slot.
func ReserveFor(c *fiber.Ctx, q *quota.Quota, kind, id string) (*quota.Reservation, error) {
	r, err := q.ReserveFor(c.UserContext(), Tenant(c), id)
	return r, exceeded(q, kind, err)
}

// exceeded maps quota.ErrExceeded to the 409 "quota_exceeded" *Error.
func exceeded(q *quota.Quota, kind string, err error) error {
	if errors.Is(err, quota.ErrExceeded) {
		return QuotaExceeded(fmt.Sprintf("this tenant holds its cap of %d %s; delete some first", q.Max(), kind))
	}
	return err
}

// Settle ends a create's reservation: it keeps the slot for id when the
// create succeeded and stored a new object, and drops it otherwise. It
// returns only the reservation's failure.
func Settle(c *fiber.Ctx, slot *quota.Reservation, id string, created bool, createErr error) error {
	if createErr == nil && created {
		return slot.Keep(c.UserContext(), id)
	}
	return slot.Drop(c.UserContext())
}

// Deleted frees the quota slot of the deleted object id and answers 204.
func Deleted(c *fiber.Ctx, q *quota.Quota, id string) error {
	return NoContent(c, q.Release(c.UserContext(), id))
}
