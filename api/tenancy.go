package api

import (
	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/internal/tenancy"
)

// View returns whose objects the request may see and change: its
// [Tenant]'s, or every tenant's when [SeesAll].
func View(c *fiber.Ctx) tenancy.View {
	return tenancy.View{Tenant: Tenant(c), All: SeesAll(c)}
}
