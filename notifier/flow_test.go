package notifier_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flow/flowtest"
	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/egress/egresstest"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/stream"
)

// newFlow builds the notifier over a fresh miniredis with settings.
func newFlow(t *testing.T, s flow.Settings) (*notifier.Flow, error) {
	t.Helper()
	rdb, err := stream.Dial(context.Background(), "redis://"+miniredis.RunT(t).Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return notifier.New(t.Context(), flow.Deps{Redis: rdb, Publisher: stream.NewPublisher(rdb, stream.Telemetry{}), Settings: s})
}

// settings reads notifier.Vars from env like the app.
func settings(env map[string]string) (flow.Settings, error) {
	values, err := flow.ReadVars(notifier.Vars, func(name string) (string, bool) { v, ok := env[name]; return v, ok })
	return flow.Settings{Partitions: 2, PublicURL: flow.DefaultPublicURL}.WithVars(values), err
}

func TestNew_maxInFlightMustBeAPositiveCount(t *testing.T) {
	for _, bad := range []string{"many", "0", "-3", "5000"} {
		t.Run(bad, func(t *testing.T) {
			s, err := settings(map[string]string{"DROPSTREAM_NOTIFIER_MAX_IN_FLIGHT": bad})
			if err == nil {
				_, err = newFlow(t, s)
			}
			if err == nil {
				t.Errorf("settings with DROPSTREAM_NOTIFIER_MAX_IN_FLIGHT=%s: no error", bad)
			}
		})
	}
	s, err := settings(map[string]string{"DROPSTREAM_NOTIFIER_MAX_IN_FLIGHT": "256"})
	if err != nil {
		t.Fatal(err)
	}
	if f, err := newFlow(t, s); err != nil || f.PublicURL() != flow.DefaultPublicURL {
		t.Errorf("New = %v; want the default public URL", err)
	}
}

// The flow declares its stage, history, services and edges validly, and
// Notify publishes valid requests to notify.requests only.
func TestFlow_describeAndNotify(t *testing.T) {
	s, _ := settings(nil)
	f, err := newFlow(t, s)
	if err != nil {
		t.Fatal(err)
	}
	d := f.Describe()
	if err := d.Validate(notifier.Name); err != nil {
		t.Fatal(err)
	}
	if got := flowtest.StageNames(d); !slices.Equal(got, []string{notifier.StageDeliver, notifier.StageHistory}) {
		t.Errorf("stages %v", got)
	}
	if len(d.Services) != 3 || d.Services[2].Name != notifier.ExpiryService {
		t.Errorf("services %+v", d.Services)
	}
	if f.Topics().Requests.String() != notifier.RequestTopic(2).String() || f.Subscribers() == nil || f.History() == nil {
		t.Errorf("topics %+v or stores missing", f.Topics())
	}
	dest := &subscriber.Destination{Kind: subscriber.KindWebhook, Address: "https://hooks.example.test/a"}
	ok := notifier.Request{Flow: "test", Event: "test.event", Subject: "s", Destination: dest, Window: "w"}
	if err := f.Notify(t.Context(), ok); err != nil {
		t.Fatal(err)
	}
	if err := f.Notify(t.Context(), notifier.Request{Flow: "test"}); !errors.Is(err, notifier.ErrInvalidRequest) {
		t.Errorf("invalid request: %v, want ErrInvalidRequest", err)
	}
	if _, ok := f.Channels()["slack"]; !ok {
		t.Errorf("channels %v lack slack", f.Channels())
	}
	if f.Dispatcher() == nil {
		t.Error("no dispatcher")
	}
}

// kindRuns numbers the runs of TestFlow_registerKind: kinds are registered
// process-wide for good, so each run registers a kind of its own.
var kindRuns atomic.Int64

// A flow registers its destination kind on one of the notifier's channels;
// subscribers and requests may use it from then on.
func TestFlow_registerKind(t *testing.T) {
	s, _ := settings(nil)
	f, err := newFlow(t, s)
	if err != nil {
		t.Fatal(err)
	}
	kind := "test_notify_" + strconv.FormatInt(kindRuns.Add(1), 10)
	dest := subscriber.Destination{Kind: kind, Address: "https://test.example/notify"}
	if err := dest.Validate(); !errors.Is(err, subscriber.ErrInvalid) {
		t.Fatalf("unregistered kind: %v, want ErrInvalid", err)
	}
	if err := f.RegisterKind(subscriber.Kind{Name: "test_pigeon", Channel: "pigeon", Core: subscriber.URLCore}); err == nil {
		t.Error("a kind on a channel the notifier lacks was registered")
	}
	for range 2 {
		if err := f.RegisterKind(notifier.SignedJSONKind(kind)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.RegisterKind(subscriber.Kind{Name: kind, Channel: "log", Core: subscriber.URLCore}); err == nil {
		t.Error("a different kind registered under the same name")
	}
	if err := dest.Validate(); err != nil || dest.Channel() != "webhook" {
		t.Fatalf("registered kind: %v, channel %q", err, dest.Channel())
	}
	if core, _ := dest.Core(); core != "url:https://test.example/notify" {
		t.Errorf("core %q", core)
	}
	created, err := f.Subscribers().Create(t.Context(), subscriber.Subscriber{Name: "n", Destinations: []subscriber.Destination{dest}})
	if err != nil || created.Subscriber.Destinations[0].Secret == "" {
		t.Fatalf("create with the kind: %v %+v, want a generated secret", err, created.Subscriber)
	}
	if err := f.Notify(t.Context(), notifier.Request{Flow: "test", Event: "e", Subject: "s", Destination: &dest, Window: "w"}); err != nil {
		t.Fatal(err)
	}
}

// An SMTP server on a denied address must be allowed by the egress policy:
// without it the notifier does not start, and says why.
func TestNew_smtpServerOnADeniedAddressNeedsTheEgressAllowList(t *testing.T) {
	s, err := settings(map[string]string{"DROPSTREAM_SMTP_ADDR": "127.0.0.1:2525", "DROPSTREAM_SMTP_FROM": "alerts@dropstream.test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newFlow(t, s); !errors.Is(err, egress.ErrDenied) {
		t.Errorf("New with a loopback SMTP server and the default policy = %v, want ErrDenied", err)
	}
	s.Egress = egresstest.Allow(t, "127.0.0.1:2525")
	f, err := newFlow(t, s)
	if err != nil {
		t.Fatalf("New with the SMTP server allowed: %v", err)
	}
	if _, ok := f.Channels()["email"]; !ok {
		t.Error("no email channel")
	}
}

// The notifier's webhooks carry the Standard Webhooks headers only; the
// X-Dropstream headers of earlier releases are added when
// DROPSTREAM_WEBHOOK_LEGACY_SIGNATURE asks for them, and a value that is
// not a boolean stops the start.
func TestNew_legacyWebhookHeadersOnlyWhenTheSettingAsks(t *testing.T) {
	if _, err := settings(map[string]string{notifier.VarWebhookLegacySignature: "sometimes"}); err == nil {
		t.Error("DROPSTREAM_WEBHOOK_LEGACY_SIGNATURE=sometimes: no error")
	}
	for _, tc := range []struct {
		value  string // "" unset
		legacy bool
	}{{"", false}, {"false", false}, {"true", true}, {"1", true}} {
		t.Run("setting "+tc.value, func(t *testing.T) {
			got := make(chan http.Header, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
			t.Cleanup(srv.Close)
			env := map[string]string{}
			if tc.value != "" {
				env[notifier.VarWebhookLegacySignature] = tc.value
			}
			s, err := settings(env)
			if err != nil {
				t.Fatal(err)
			}
			s.Egress = egresstest.Allow(t, srv.URL)
			f, err := newFlow(t, s)
			if err != nil {
				t.Fatal(err)
			}
			secret, body := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", []byte(`{"id":"n-1"}`)
			n := notifier.Notification{Flow: "test", EventID: "n-1", Recipient: notifier.Recipient{ID: "s-1", Address: srv.URL, Secret: secret}, Body: body}
			if err := f.Channels()[notifier.ChannelWebhook].Send(t.Context(), n); err != nil {
				t.Fatal(err)
			}
			h := <-got
			if err := notifier.VerifyWebhook(secret, h, body, time.Now(), 0); err != nil || h.Get(notifier.HeaderWebhookID) != "n-1" {
				t.Errorf("Standard Webhooks headers %v: %v; want them verified, webhook-id n-1", h, err)
			}
			sig, id := h.Get(notifier.HeaderSignature), h.Get(notifier.HeaderEventID)
			switch {
			case !tc.legacy && (sig != "" || id != ""):
				t.Errorf("legacy headers %q, %q sent without the setting", sig, id)
			case tc.legacy && (id != "n-1" || notifier.VerifySignature(secret, sig, body, time.Now(), 0) != nil):
				t.Errorf("legacy headers %q, %q: want the event id and a valid X-Dropstream-Signature", sig, id)
			}
		})
	}
}
