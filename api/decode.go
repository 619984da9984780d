package api

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
)

// CodeInvalidJSON is the envelope code of every [DecodeJSON] body error.
const CodeInvalidJSON = "invalid_json"

// DecodeJSON decodes the request body of c into v (a non-nil pointer)
// strictly. It returns an [*Error] for the client's mistakes: 415
// "unsupported_media_type" unless Content-Type is application/json or
// application/*+json; 400 "invalid_json" for an empty or malformed body, a
// value of the wrong type, an unknown field or data after the value. Any
// other error is a programming error (a 500). Handlers return it unchanged.
func DecodeJSON(c *fiber.Ctx, v any) error {
	if ct := c.Get(fiber.HeaderContentType); !isJSONMediaType(ct) {
		return UnsupportedMediaType("unsupported_media_type",
			"Content-Type must be application/json, got "+cmp.Or(ct, "none"))
	}
	body := c.Body()
	if len(bytes.TrimSpace(body)) == 0 {
		return BadRequest(CodeInvalidJSON, "request body is empty")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return blameField(jsonError(err, reflect.TypeOf(v)), body, reflect.TypeOf(v))
	}
	end := dec.InputOffset()
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return BadRequest(CodeInvalidJSON,
			fmt.Sprintf("unexpected data after the JSON value at offset %d", end))
	}
	return nil
}

// Body decodes the request body of c into a T as [DecodeJSON] does.
func Body[T any](c *fiber.Ctx) (T, error) {
	var v T
	err := DecodeJSON(c, &v)
	return v, err
}

// isJSONMediaType reports whether ct is application/json or
// application/<something>+json.
func isJSONMediaType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == fiber.MIMEApplicationJSON ||
		(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// jsonError translates a decoding error into v's type t into an *Error,
// or a valueError, or wraps it when it is not the client's fault.
func jsonError(err error, t reflect.Type) error {
	var (
		syntaxErr *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
		invalid   *json.InvalidUnmarshalError
	)
	switch {
	case errors.As(err, &syntaxErr):
		return BadRequest(CodeInvalidJSON,
			fmt.Sprintf("malformed JSON at offset %d: %s", syntaxErr.Offset, trimJSONPrefix(syntaxErr.Error())))
	case errors.As(err, &typeErr):
		want := jsonKind(typeErr.Type)
		if typeErr.Field == "" {
			return BadRequest(CodeInvalidJSON,
				fmt.Sprintf("the request body must be a JSON %s, not %s", want, typeErr.Value))
		}
		return BadRequest(CodeInvalidJSON,
			fmt.Sprintf("field %q must be a JSON %s, not %s (offset %d)", jsonFieldPath(t, typeErr.Field), want, typeErr.Value, typeErr.Offset))
	case errors.As(err, &invalid):
		return fmt.Errorf("api: DecodeJSON: %w", err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return BadRequest(CodeInvalidJSON, "malformed JSON: unexpected end of input")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json has no typed error for unknown fields.
		return BadRequest(CodeInvalidJSON, trimJSONPrefix(err.Error()))
	}
	if strings.HasPrefix(err.Error(), "json: ") {
		return BadRequest(CodeInvalidJSON, "malformed JSON: "+trimJSONPrefix(err.Error()))
	}
	var timeErr *time.ParseError
	if errors.As(err, &timeErr) || strings.HasPrefix(err.Error(), "Time.UnmarshalJSON") {
		return valueError("want a time in RFC 3339 format")
	}
	// A type's own UnmarshalJSON refused a value: its message says which.
	return valueError(err.Error())
}

// valueError is the message of a value a type's UnmarshalJSON refused;
// [blameField] names its field.
type valueError string

func (e valueError) Error() string { return string(e) }

// blameField makes a valueError a 400 invalid_json naming the top-level
// field of the body its type refused; other errors are returned as they are.
func blameField(err error, body []byte, t reflect.Type) error {
	ve, ok := err.(valueError)
	if !ok {
		return err
	}
	out := Error{Status: http.StatusBadRequest, Code: CodeInvalidJSON, Message: string(ve)}
	t = elemType(t)
	var fields map[string]json.RawMessage
	if t == nil || t.Kind() != reflect.Struct || json.Unmarshal(body, &fields) != nil {
		return &out
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		f, ok := jsonField(t, name)
		if !ok {
			continue
		}
		if json.Unmarshal(fields[name], reflect.New(f.Type).Interface()) != nil {
			out.Message = fmt.Sprintf("field %q: %s", name, out.Message)
			break
		}
	}
	return &out
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Float32, reflect.Float64:
		return "number"
	}
	if t.Kind() >= reflect.Int && t.Kind() <= reflect.Uintptr {
		return "integer"
	}
	return "value"
}

func trimJSONPrefix(s string) string { return strings.TrimPrefix(s, "json: ") }
