package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
)

type thingIn struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
	Inner struct {
		Size int `json:"size"`
	} `json:"inner"`
}

func TestDecodeJSON_strict(t *testing.T) {
	tests := []struct {
		name        string
		contentType string
		body        string
		wantStatus  int
		wantCode    string
		wantMsg     string // substring of the message
	}{
		{"valid", "application/json", `{"name":"a","count":2,"inner":{"size":3}}`, http.StatusOK, "", ""},
		{"valid with charset", "application/json; charset=utf-8", `{"name":"a"}`, http.StatusOK, "", ""},
		{"valid +json type", "application/merge-patch+json", `{"name":"a"}`, http.StatusOK, "", ""},
		{"valid with trailing whitespace", "application/json", "{\"name\":\"a\"}\n", http.StatusOK, "", ""},
		{"no content type", "", `{"name":"a"}`, http.StatusUnsupportedMediaType, "unsupported_media_type", "got none"},
		{"text/plain", "text/plain", `{"name":"a"}`, http.StatusUnsupportedMediaType, "unsupported_media_type", "got text/plain"},
		{"form", "application/x-www-form-urlencoded", `name=a`, http.StatusUnsupportedMediaType, "unsupported_media_type", "application/json"},
		{"empty body", "application/json", ``, http.StatusBadRequest, CodeInvalidJSON, "empty"},
		{"syntax error", "application/json", `{"name":"a",}`, http.StatusBadRequest, CodeInvalidJSON, "offset 13"},
		{"truncated", "application/json", `{"name":"a"`, http.StatusBadRequest, CodeInvalidJSON, "unexpected end"},
		{"unknown field", "application/json", `{"name":"a","colour":"red"}`, http.StatusBadRequest, CodeInvalidJSON, `unknown field "colour"`},
		{"wrong type", "application/json", `{"count":"two"}`, http.StatusBadRequest, CodeInvalidJSON, `field "count" must be a JSON integer, not string`},
		{"wrong nested type", "application/json", `{"inner":{"size":true}}`, http.StatusBadRequest, CodeInvalidJSON, `field "inner.size"`},
		{"trailing object", "application/json", `{"name":"a"}{"name":"b"}`, http.StatusBadRequest, CodeInvalidJSON, "after the JSON value at offset 12"},
		{"trailing garbage", "application/json", `{"name":"a"} x`, http.StatusBadRequest, CodeInvalidJSON, "after the JSON value"},
		{"array instead of object", "application/json", `[1]`, http.StatusBadRequest, CodeInvalidJSON, "must be a JSON object, not array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestServer(t, Config{})
			var got thingIn
			s.App().Post("/things", func(c *fiber.Ctx) error {
				if err := DecodeJSON(c, &got); err != nil {
					return err
				}
				return c.SendStatus(http.StatusOK)
			})
			req, _ := http.NewRequest(http.MethodPost, "/things", strings.NewReader(tt.body))
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			r := do(t, s, req)
			if tt.wantCode == "" {
				if r.status != tt.wantStatus {
					t.Fatalf("status = %d, want %d (%s)", r.status, tt.wantStatus, r.body)
				}
				if got.Name != "a" {
					t.Errorf("decoded %+v", got)
				}
				return
			}
			e := wantEnvelope(t, r, tt.wantStatus, tt.wantCode)
			if !strings.Contains(e.Message, tt.wantMsg) {
				t.Errorf("message = %q, want it to contain %q", e.Message, tt.wantMsg)
			}
			if strings.Contains(e.Message, "thingIn") {
				t.Errorf("message %q reveals a Go type name", e.Message)
			}
		})
	}
}

func TestDecodeJSON_nonPointerIsInternal(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	s.App().Post("/x", func(c *fiber.Ctx) error {
		var v thingIn
		return DecodeJSON(c, v)
	})
	req, _ := http.NewRequest(http.MethodPost, "/x", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	wantEnvelope(t, do(t, s, req), http.StatusInternalServerError, "internal")
}

func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"name":"a","count":1}`, `{"inner":{"size":1}}`, `[`, `{"x":1}`, `{} {}`, `null`, `"\u00"`} {
		f.Add(s)
	}
	s, err := New(Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	s.App().Post("/things", func(c *fiber.Ctx) error {
		var v thingIn
		if err := DecodeJSON(c, &v); err != nil {
			return err
		}
		return c.SendStatus(http.StatusOK)
	})
	f.Fuzz(func(t *testing.T, body string) {
		req, _ := http.NewRequest(http.MethodPost, "/things", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		res, err := s.App().Test(req, 5000)
		if err != nil {
			t.Fatalf("body %q: %v", body, err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode == http.StatusOK {
			return
		}
		wantEnvelope(t, response{status: res.StatusCode, header: res.Header, body: b}, http.StatusBadRequest, CodeInvalidJSON)
	})
}

// wireThing decodes through its own UnmarshalJSON over an embedded alias,
// the way a type with a wire form does: encoding/json then names the Go
// alias in the field path.
type wireThing struct {
	ID    string `json:"id"`
	Every string `json:"every"`
}

type wireThingFields wireThing

func (w *wireThing) UnmarshalJSON(b []byte) error {
	var in struct {
		wireThingFields
		Extra int `json:"extra"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return fmt.Errorf("invalid thing: %w", err)
	}
	if in.Every == "never" {
		return errors.New("invalid thing: every: want a duration")
	}
	*w = wireThing(in.wireThingFields)
	return nil
}

func TestDecodeJSON_messagesNameJSONFieldsNotGoOnes(t *testing.T) {
	tests := []struct {
		body, want string
	}{
		{`{"id":5}`, `field "id" must be a JSON string, not number`},
		{`{"every":"never"}`, "invalid thing: every: want a duration"},
	}
	for _, tt := range tests {
		s, _ := newTestServer(t, Config{})
		s.App().Post("/things", func(c *fiber.Ctx) error {
			var w wireThing
			if err := DecodeJSON(c, &w); err != nil {
				return err
			}
			return c.SendStatus(http.StatusOK)
		})
		req, _ := http.NewRequest(http.MethodPost, "/things", strings.NewReader(tt.body))
		req.Header.Set("Content-Type", "application/json")
		e := wantEnvelope(t, do(t, s, req), http.StatusBadRequest, CodeInvalidJSON)
		if !strings.HasPrefix(e.Message, tt.want) || strings.Contains(e.Message, "wireThing") || strings.Contains(e.Message, "malformed") {
			t.Errorf("%s: message = %q, want it to start with %q and name no Go type", tt.body, e.Message, tt.want)
		}
	}
}
