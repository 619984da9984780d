// Package flowhttp holds the route helpers the flows' httpapi packages
// share: the answer of a create, and the quota slot a create takes and a
// delete frees.
package flowhttp

import (
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/internal/quota"
)

// Created answers v as JSON: 201 when created, else 200.
func Created(c *fiber.Ctx, created bool, v any) error {
	if created {
		c.Status(http.StatusCreated)
	}
	return c.JSON(v)
}

// Settle ends a create's quota reservation: it keeps the slot for id when
// the create succeeded and stored a new object, and drops it otherwise.
// It returns only the reservation's failure.
func Settle(c *fiber.Ctx, slot *quota.Reservation, id string, created bool, createErr error) error {
	if createErr == nil && created {
		return slot.Keep(c.UserContext(), id)
	}
	return slot.Drop(c.UserContext())
}

// Deleted frees the quota slot of the deleted object id and answers 204.
func Deleted(c *fiber.Ctx, q *quota.Quota, id string) error {
	if err := q.Release(c.UserContext(), id); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}
