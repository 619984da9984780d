package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
)

// Paths of the operational routes. They need no API key, are not traced and
// are access-logged at Debug level only.
const (
	PathHealthz = "/healthz"
	PathReadyz  = "/readyz"
	PathMetrics = "/metrics"
)

// isOperational reports whether path is one of the operational routes.
func isOperational(path string) bool {
	return path == PathHealthz || path == PathReadyz || path == PathMetrics
}

// healthBody is the body of /healthz.
type healthBody struct {
	Status string `json:"status"`
}

// readyBody is the body of /readyz; checks is always present.
type readyBody struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

func (s *Server) registerOperationalRoutes() {
	s.app.Get(PathHealthz, func(c *fiber.Ctx) error {
		return c.JSON(healthBody{Status: "ok"})
	})
	s.app.Get(PathReadyz, s.handleReadyz)
	s.app.Get(PathOpenAPI, func(c *fiber.Ctx) error { return c.JSON(s.OpenAPI()) })
	if s.cfg.MetricsHandler != nil {
		s.app.Get(PathMetrics, adaptor.HTTPHandler(s.cfg.MetricsHandler))
	}
}

// handleReadyz runs every readiness check concurrently under
// Config.ReadyTimeout: 200 "ready" when all pass, else 503 "unready". Each
// check's result is "ok" or its error text.
func (s *Server) handleReadyz(c *fiber.Ctx) error {
	results := s.runChecks(c.UserContext())
	body := readyBody{Status: "ready", Checks: results}
	status := fiber.StatusOK
	for _, r := range results {
		if r != "ok" {
			body.Status = "unready"
			status = fiber.StatusServiceUnavailable
			break
		}
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Status(status).JSON(body)
}

type checkResult struct {
	name string
	err  error
}

// errCheckPanicked is reported for a readiness check that panicked.
var errCheckPanicked = errors.New("check panicked")

// runChecks runs all checks concurrently and returns name -> "ok" or error
// text. It returns by the deadline even if a check ignores its context; such
// a check is reported with the context's error and its late result dropped.
func (s *Server) runChecks(parent context.Context) map[string]string {
	results := make(map[string]string, len(s.cfg.Checks))
	ctx, cancel := context.WithTimeout(parent, s.cfg.ReadyTimeout)
	defer cancel()

	done := make(chan checkResult, len(s.cfg.Checks)) // buffered: late checks never block
	for _, chk := range s.cfg.Checks {
		go func() {
			defer func() {
				if r := recover(); r != nil {
					done <- checkResult{chk.Name, fmt.Errorf("%w: %v", errCheckPanicked, r)}
				}
			}()
			done <- checkResult{chk.Name, chk.Check(ctx)}
		}()
	}
	for range s.cfg.Checks {
		select {
		case r := <-done:
			results[r.name] = resultText(r.err)
		case <-ctx.Done():
			drain(done, results)
			for _, chk := range s.cfg.Checks {
				if _, ok := results[chk.Name]; !ok {
					results[chk.Name] = resultText(fmt.Errorf("no answer: %w", ctx.Err()))
				}
			}
			return results
		}
	}
	return results
}

func resultText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// drain moves the results already delivered on done into results.
func drain(done <-chan checkResult, results map[string]string) {
	for {
		select {
		case r := <-done:
			results[r.name] = resultText(r.err)
		default:
			return
		}
	}
}
