package api

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/stream"
)

// Error is an error response: handlers return it (possibly wrapped) and
// it is rendered with status Status as {"error":{"code":Code,"message":Message}}.
type Error struct {
	Status int // 4xx or 5xx
	// Code is a stable snake_case identifier clients can switch on.
	Code string
	// Message is sent to the client, so it holds no secrets. It is sent on
	// one line, with encoding/json's Go names replaced by the JSON ones.
	Message string
}

// Error implements error as "<status> <code>: <message>".
func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// NewError returns an *Error with the given status, code and message.
func NewError(status int, code, msg string) *Error {
	return &Error{Status: status, Code: code, Message: msg}
}

// BadRequest returns a 400 *Error.
func BadRequest(code, msg string) *Error { return NewError(http.StatusBadRequest, code, msg) }

// Unauthorized returns a 401 *Error (the client is not authenticated).
func Unauthorized(code, msg string) *Error { return NewError(http.StatusUnauthorized, code, msg) }

// Forbidden returns a 403 *Error (authenticated but not allowed).
func Forbidden(code, msg string) *Error { return NewError(http.StatusForbidden, code, msg) }

// NotFound returns a 404 *Error.
func NotFound(code, msg string) *Error { return NewError(http.StatusNotFound, code, msg) }

// Conflict returns a 409 *Error.
func Conflict(code, msg string) *Error { return NewError(http.StatusConflict, code, msg) }

// UnprocessableEntity returns a 422 *Error (well-formed but invalid input).
func UnprocessableEntity(code, msg string) *Error {
	return NewError(http.StatusUnprocessableEntity, code, msg)
}

// UnsupportedMediaType returns a 415 *Error.
func UnsupportedMediaType(code, msg string) *Error {
	return NewError(http.StatusUnsupportedMediaType, code, msg)
}

// errInternal answers any other error; the cause is logged, never sent.
var errInternal = &Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error"}

// errUnavailable answers an error of stream.IsUnavailable; the cause is
// logged, never sent.
var errUnavailable = &Error{Status: http.StatusServiceUnavailable, Code: "unavailable",
	Message: "a backing store is unavailable; try again shortly"}

// RetryAfterUnavailable is the Retry-After, in seconds, of a 503
// "unavailable" answer.
const RetryAfterUnavailable = "5"

// envelope is the JSON body of every error response.
type envelope struct {
	Error envelopeError `json:"error"`
}

type envelopeError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// handleError is the Fiber ErrorHandler: it renders err as the JSON
// envelope, an error neither *Error nor *fiber.Error as a logged 500.
func (s *Server) handleError(c *fiber.Ctx, err error) error {
	// Errors raised before routing (413, 431) come without the middleware
	// chain: no request id yet, no access log.
	outsideChain := RequestID(c) == ""
	requestID := ensureRequestID(c)
	var (
		apiErr   *Error
		fiberErr *fiber.Error
		out      *Error
	)
	switch {
	case errors.As(err, &apiErr):
		out = normalize(apiErr)
	case errors.As(err, &fiberErr):
		out = s.fromFiberError(fiberErr)
		if out.Status == fiber.StatusNotFound && isRoutingError(err) {
			out.Message = "no route for " + c.Method() + " " + string(c.Request().URI().Path())
		}
	default:
		level, msg, status := slog.LevelError, "api: request failed", err.Error()
		out = errInternal
		if stream.IsUnavailable(err) {
			level, msg, status = slog.LevelWarn, "api: request failed: a backing store is unavailable", "unavailable"
			out = errUnavailable
			c.Set(fiber.HeaderRetryAfter, RetryAfterUnavailable)
		} else {
			trace.SpanFromContext(c.UserContext()).RecordError(err)
		}
		s.log.LogAttrs(c.UserContext(), level, msg,
			slog.String("method", c.Method()),
			slog.String("path", string(c.Request().URI().Path())),
			slog.String("request_id", requestID),
			slog.Any("error", err))
		trace.SpanFromContext(c.UserContext()).SetStatus(codes.Error, status)
	}
	if err := c.Status(out.Status).JSON(envelope{Error: envelopeError{Code: out.Code, Message: clientMessage(out.Message)}}); err != nil {
		return fmt.Errorf("api: write error response: %w", err)
	}
	if outsideChain {
		s.logAccess(c, "", 0)
	}
	return nil
}

// normalize fills in what a handler left out of e: a status outside
// 400-599 is 500; the code and message come from the status.
func normalize(e *Error) *Error {
	if e.Status >= 400 && e.Status <= 599 && e.Code != "" && e.Message != "" {
		return e
	}
	out := *e
	if out.Status < 400 || out.Status > 599 {
		out.Status = http.StatusInternalServerError
	}
	if out.Code == "" {
		out.Code = codeForStatus(out.Status)
	}
	if out.Message == "" {
		out.Message = strings.ToLower(http.StatusText(out.Status))
	}
	return &out
}

// fromFiberError maps a *fiber.Error to an *Error.
func (s *Server) fromFiberError(e *fiber.Error) *Error {
	msg := e.Message
	switch e.Code {
	case fiber.StatusRequestEntityTooLarge:
		msg = fmt.Sprintf("request body exceeds the limit of %d bytes", s.cfg.BodyLimit)
	case fiber.StatusMethodNotAllowed:
		msg = "method not allowed on this route"
	}
	return &Error{Status: e.Code, Code: codeForStatus(e.Code), Message: msg}
}

// statusCodes are the envelope codes of the statuses with a conventional
// name; others are derived from the status text.
var statusCodes = map[int]string{
	http.StatusBadRequest:                  "bad_request",
	http.StatusUnauthorized:                "unauthenticated",
	http.StatusForbidden:                   "forbidden",
	http.StatusNotFound:                    "not_found",
	http.StatusMethodNotAllowed:            "method_not_allowed",
	http.StatusRequestTimeout:              "request_timeout",
	http.StatusConflict:                    "conflict",
	http.StatusRequestEntityTooLarge:       "payload_too_large",
	http.StatusUnsupportedMediaType:        "unsupported_media_type",
	http.StatusUnprocessableEntity:         "unprocessable_entity",
	http.StatusTooManyRequests:             "rate_limited",
	http.StatusRequestHeaderFieldsTooLarge: "headers_too_large",
	http.StatusInternalServerError:         "internal",
	http.StatusServiceUnavailable:          "unavailable",
}

// codeForStatus returns the envelope code for an HTTP status.
func codeForStatus(status int) string {
	if code, ok := statusCodes[status]; ok {
		return code
	}
	text := http.StatusText(status)
	if text == "" {
		if status >= 500 {
			return "internal"
		}
		return "error"
	}
	return strings.NewReplacer(" ", "_", "-", "_", "'", "").Replace(strings.ToLower(text))
}

// Case maps the errors wrapping one target to an *Error; see [MapError].
type Case struct {
	target error
	as     *Error
}

// When returns the Case answering e for an error wrapping target; when e
// has no message, the error's own text is sent.
func When(target error, e *Error) Case { return Case{target: target, as: e} }

// MapError returns the *Error of the first case whose target err wraps,
// or err itself (nil for nil): the mapping of a flow's errors to a route's
// answers.
func MapError(err error, cases ...Case) error {
	for _, k := range cases {
		if errors.Is(err, k.target) {
			out := *k.as
			if out.Message == "" {
				out.Message = err.Error()
			}
			return &out
		}
	}
	return err
}

// Reply answers v as JSON when err is nil; else it returns err mapped by
// cases (see [MapError]).
func Reply(c *fiber.Ctx, v any, err error, cases ...Case) error {
	if err != nil {
		return MapError(err, cases...)
	}
	return c.JSON(v)
}

// Created answers v as JSON: 201 when created, else 200.
func Created(c *fiber.Ctx, created bool, v any) error {
	if created {
		c.Status(http.StatusCreated)
	}
	return c.JSON(v)
}

// NoContent answers 204 when err is nil; else it returns err mapped by
// cases (see [MapError]).
func NoContent(c *fiber.Ctx, err error, cases ...Case) error {
	if err != nil {
		return MapError(err, cases...)
	}
	return c.SendStatus(http.StatusNoContent)
}
