package notifier

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/stream"
)

func testNotification(url string) Notification {
	return Notification{Flow: "avail", Event: "availability.open",
		Recipient: Recipient{ID: "w_1", Address: url, Secret: "whsec_test-secret-0123"},
		EventID:   "ev-1", SessionID: "s-1", Subject: "resy|v1|2025-07-04|19:00|2", TraceID: "0af7651916cd43dd8448eb211c80319c",
		ObservedAt: time.Now(), Body: []byte(`{"event":"availability.open","watcher_id":"w_1"}`)}
}

// newWebhook returns a webhook channel of cfg that may reach the test's
// servers on loopback, unless cfg sets its own policy.
func newWebhook(t *testing.T, cfg WebhookConfig) *WebhookChannel {
	t.Helper()
	if cfg.Egress == nil {
		cfg.Egress = egresstest.Loopback(t)
	}
	w, err := NewWebhookChannel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestWebhookChannel_send(t *testing.T) {
	type request struct {
		method string
		header http.Header
		body   []byte
	}
	got := make(chan request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- request{r.Method, r.Header.Clone(), body}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	n := testNotification(srv.URL + "/hook")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	if err := newWebhook(t, WebhookConfig{}).Send(ctx, n); err != nil {
		t.Fatalf("Send: %v", err)
	}
	r := <-got
	if r.method != http.MethodPost || !bytes.Equal(r.body, n.Body) {
		t.Errorf("got %s %s", r.method, r.body)
	}
	for k, want := range map[string]string{"Content-Type": "application/json", HeaderWebhookID: "ev-1", "User-Agent": DefaultUserAgent} {
		if v := r.header.Get(k); v != want {
			t.Errorf("header %s = %q, want %q", k, v, want)
		}
	}
	if err := VerifyWebhook(n.Recipient.Secret, r.header, r.body, time.Now(), time.Minute); err != nil {
		t.Errorf("signature does not verify: %v", err)
	}
	if tp := r.header.Get("traceparent"); !strings.Contains(tp, sc.TraceID().String()) {
		t.Errorf("traceparent %q does not carry the trace", tp)
	}
}

func TestWebhookChannel_classify(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		body      string
		wantErr   bool
		permanent bool
		class     egress.Class
	}{
		{"200", 200, "ok", false, false, ""},
		{"202", 202, "", false, false, ""},
		{"204", 204, "", false, false, ""},
		{"301 not followed", 301, "", true, true, egress.ClassHTTPStatus},
		{"400", 400, `{"error":"bad watcher"}`, true, true, egress.ClassHTTP4xx},
		{"401", 401, "", true, true, egress.ClassHTTP4xx},
		{"404", 404, "", true, true, egress.ClassHTTP4xx},
		{"410", 410, "", true, true, egress.ClassHTTP4xx},
		{"408", 408, "", true, false, egress.ClassHTTP4xx},
		{"429", 429, "slow down", true, false, egress.ClassHTTP4xx},
		{"500", 500, "boom: AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI", true, false, egress.ClassHTTP5xx},
		{"503", 503, "", true, false, egress.ClassHTTP5xx},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			redirected := false
			mux := http.NewServeMux()
			mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, _ *http.Request) { redirected = true })
			mux.HandleFunc("/hook", func(w http.ResponseWriter, _ *http.Request) {
				if tt.status == 301 {
					w.Header().Set("Location", "/elsewhere")
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			})
			srv := httptest.NewServer(mux)
			defer srv.Close()
			err := newWebhook(t, WebhookConfig{}).Send(context.Background(), testNotification(srv.URL+"/hook"))
			if (err != nil) != tt.wantErr {
				t.Fatalf("Send = %v, want error %v", err, tt.wantErr)
			}
			if redirected {
				t.Error("redirect followed")
			}
			if err == nil {
				return
			}
			if stream.IsPermanent(err) != tt.permanent {
				t.Errorf("permanent = %v, want %v (%v)", !tt.permanent, tt.permanent, err)
			}
			var de *DeliveryError
			if !errors.As(err, &de) || de.StatusCode != tt.status || de.Retryable == tt.permanent || de.Class != tt.class {
				t.Fatalf("error %v: want a *DeliveryError with status %d and class %s", err, tt.status, tt.class)
			}
			// The error is what the history keeps: the status and the
			// class, never the receiver's answer.
			if tt.body != "" && strings.Contains(err.Error(), tt.body) {
				t.Errorf("error %q quotes the answer %q", err, tt.body)
			}
			if !strings.Contains(err.Error(), "status "+strconv.Itoa(tt.status)) || !strings.Contains(err.Error(), string(tt.class)) {
				t.Errorf("error %q lacks the status %d or the class %s", err, tt.status, tt.class)
			}
		})
	}
}

func TestWebhookChannel_failures(t *testing.T) {
	t.Run("network error is retryable", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		err := newWebhook(t, WebhookConfig{}).Send(context.Background(), testNotification(url))
		var de *DeliveryError
		if err == nil || stream.IsPermanent(err) || !errors.As(err, &de) || !de.Retryable {
			t.Errorf("Send to a closed server = %v, want a retryable *DeliveryError", err)
		}
	})
	t.Run("timeout is retryable", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}))
		defer srv.Close()
		defer close(release)
		start := time.Now()
		err := newWebhook(t, WebhookConfig{Timeout: 100 * time.Millisecond}).Send(context.Background(), testNotification(srv.URL))
		if err == nil || stream.IsPermanent(err) {
			t.Errorf("Send to a stuck server = %v, want a retryable error", err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("Send took %v with a 100ms timeout", took)
		}
	})
	t.Run("timeout is classified as a timeout", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}))
		defer srv.Close()
		defer close(release)
		err := newWebhook(t, WebhookConfig{Timeout: 100 * time.Millisecond}).Send(context.Background(), testNotification(srv.URL))
		var de *DeliveryError
		if !errors.As(err, &de) || de.Class != egress.ClassTimeout || !de.Retryable {
			t.Errorf("Send to a stuck server = %v, want a retryable *DeliveryError of class %q", err, egress.ClassTimeout)
		}
	})
	t.Run("answer whose body stalls ends at the timeout", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("partial"))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}))
		defer srv.Close()
		defer close(release)
		done := make(chan error, 1)
		// The timeout leaves a loaded machine time to read the headers.
		go func() {
			done <- newWebhook(t, WebhookConfig{Timeout: time.Second}).Send(context.Background(), testNotification(srv.URL))
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Send of a 200 whose body stalls = %v, want delivered", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Send still reading a stalled answer 10s after its 1s timeout")
		}
	})
	t.Run("credentials in the URL are sent as basic auth", func(t *testing.T) {
		got := make(chan string, 1)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			user, pass, _ := r.BasicAuth()
			got <- user + ":" + pass
			w.WriteHeader(http.StatusNoContent)
		}))
		defer srv.Close()
		u := strings.Replace(srv.URL, "http://", "http://hook:s3cret@", 1)
		if err := newWebhook(t, WebhookConfig{}).Send(context.Background(), testNotification(u)); err != nil {
			t.Fatalf("Send: %v", err)
		}
		if a := <-got; a != "hook:s3cret" {
			t.Errorf("basic auth %q, want hook:s3cret", a)
		}
	})
	t.Run("response body is read bounded", func(t *testing.T) {
		written := make(chan int64, 1)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			n, _ := io.Copy(w, io.LimitReader(zeros{}, 64<<20))
			written <- n
		}))
		defer srv.Close()
		err := newWebhook(t, WebhookConfig{MaxResponseBytes: 1024}).Send(context.Background(), testNotification(srv.URL))
		var de *DeliveryError
		if !errors.As(err, &de) || de.Detail != "" || de.Class != egress.ClassHTTP5xx {
			t.Fatalf("Send = %v, want a *DeliveryError of class http_5xx without detail", err)
		}
		if n := <-written; n >= 64<<20 {
			t.Errorf("server wrote its whole %d-byte body: the response was read to the end", n)
		}
	})
	t.Run("malformed answer's error quotes none of it", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			if req, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
				_, _ = io.Copy(io.Discard, req.Body)
			}
			_, _ = io.WriteString(c, "HTTP/1.1 2x0 peer-secret-7\r\npeer-secret-7\r\n\r\n")
		}()
		err = newWebhook(t, WebhookConfig{}).Send(context.Background(), testNotification("http://"+ln.Addr().String()+"/hook"))
		var de *DeliveryError
		if !errors.As(err, &de) || !de.Retryable || de.Err == nil {
			t.Fatalf("Send = %v, want a retryable *DeliveryError with its cause", err)
		}
		if msg := err.Error() + " " + de.Err.Error(); strings.Contains(msg, "peer-secret-7") {
			t.Errorf("error %q quotes the answer", msg)
		}
	})
	t.Run("receiver on a denied address is permanent and unreached", func(t *testing.T) {
		reached := false
		srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
		defer srv.Close()
		for _, url := range []string{srv.URL, "http://169.254.169.254/latest/meta-data/"} {
			err := newWebhook(t, WebhookConfig{Egress: egress.Default()}).Send(context.Background(), testNotification(url))
			var de *DeliveryError
			if !stream.IsPermanent(err) || !errors.As(err, &de) || de.Class != egress.ClassDenied || !errors.Is(err, egress.ErrDenied) {
				t.Errorf("Send to %s = %v, want a permanent denied *DeliveryError", url, err)
			}
		}
		if reached {
			t.Error("the loopback receiver was reached")
		}
	})
	t.Run("recipient without url is permanent", func(t *testing.T) {
		err := newWebhook(t, WebhookConfig{}).Send(context.Background(), testNotification(""))
		if !stream.IsPermanent(err) {
			t.Errorf("Send = %v, want permanent", err)
		}
	})
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestWebhookConfig_validate(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  WebhookConfig
		ok   bool
	}{
		{"defaults", WebhookConfig{}, true},
		{"negative timeout", WebhookConfig{Timeout: -time.Second}, false},
		{"huge timeout", WebhookConfig{Timeout: time.Hour}, false},
		{"negative response bound", WebhookConfig{MaxResponseBytes: -1}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewWebhookChannel(tt.cfg)
			if (err == nil) != tt.ok {
				t.Errorf("NewWebhookChannel = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func TestLogChannel_send(t *testing.T) {
	var buf bytes.Buffer
	ch := NewLogChannel(slog.New(slog.NewJSONHandler(&buf, nil)))
	if ch.Name() != ChannelLog {
		t.Errorf("Name = %q", ch.Name())
	}
	if err := ch.Send(context.Background(), testNotification("")); err != nil {
		t.Fatalf("Send: %v", err)
	}
	line := buf.String()
	if strings.Count(line, "\n") != 1 {
		t.Errorf("want one log line, got %q", line)
	}
	for _, want := range []string{`"msg":"notification"`, `"recipient_id":"w_1"`, `"event_id":"ev-1"`, `"session_id":"s-1"`,
		`"flow":"avail"`, `"subject":"resy|v1|2025-07-04|19:00|2"`, `"origin_trace_id":"0af7651916cd43dd8448eb211c80319c"`} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %s lacks %s", line, want)
		}
	}
}

// The Slack channel posts {"text": title, text and the unsubscribe link},
// signed like a webhook.
func TestSlackChannel_send(t *testing.T) {
	type request struct {
		header http.Header
		body   []byte
	}
	got := make(chan request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- request{r.Header.Clone(), body}
	}))
	defer srv.Close()
	ch := NewSlackChannel(newWebhook(t, WebhookConfig{}))
	if ch.Name() != ChannelSlack {
		t.Errorf("Name = %q", ch.Name())
	}
	n := testNotification(srv.URL + "/T1")
	n.Title, n.Text, n.UnsubscribeURL = "Amazing Fantasy #15 is in", "A copy in stock", "http://ds.test/v1/unsubscribe/tok"
	if err := ch.Send(context.Background(), n); err != nil {
		t.Fatalf("Send: %v", err)
	}
	r := <-got
	var msg map[string]string
	if err := json.Unmarshal(r.body, &msg); err != nil || len(msg) != 1 ||
		msg["text"] != "Amazing Fantasy #15 is in\nA copy in stock\n<http://ds.test/v1/unsubscribe/tok|Unsubscribe>" {
		t.Fatalf("body %s (%v): want the title, text and unsubscribe link as text", r.body, err)
	}
	if err := VerifyWebhook(n.Recipient.Secret, r.header, r.body, time.Now(), time.Minute); err != nil {
		t.Errorf("signature does not verify: %v", err)
	}
}
