package subscriber

import (
	"errors"
	"strings"
	"testing"
)

// The built-in kinds keep their channels, cores and secrets, and an
// unknown kind's error names every registered one.
func TestKinds_builtIn(t *testing.T) {
	for _, tt := range []struct {
		kind, address, channel, core string
		secret                       bool
	}{
		{KindEmail, "Ann@Example.COM", "email", "email:ann@example.com", false},
		{KindWebhook, "HTTPS://Hooks.example.com:443/a/", "webhook", "url:https://hooks.example.com/a", true},
		{KindSlack, "https://hooks.slack.test/T1", "slack", "url:https://hooks.slack.test/T1", true},
	} {
		d := Destination{Kind: tt.kind, Address: tt.address}
		k, ok := LookupKind(tt.kind)
		if core, err := d.Core(); err != nil || core != tt.core || d.Channel() != tt.channel || !ok || k.Secret != tt.secret {
			t.Errorf("%s: core %q %v, channel %q, kind %+v", tt.kind, core, err, d.Channel(), k)
		}
	}
	_, err := Destination{Kind: "fax", Address: "x"}.Core()
	if !errors.Is(err, ErrInvalid) || !strings.HasSuffix(err.Error(), `destination kind "fax": want email, webhook or slack`) {
		t.Errorf("unknown kind: %v", err)
	}
	if err := (Destination{Kind: KindEmail, Address: "a@b.co", Secret: "0123456789abcdef"}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "an email destination takes no secret") {
		t.Errorf("email with a secret: %v", err)
	}
	if err := RegisterKind(Kind{Name: KindEmail, Channel: "email", Core: URLCore}); err == nil {
		t.Error("email registered again with another core")
	}
	if err := RegisterKind(Kind{Name: "", Channel: "x", Core: URLCore}); err == nil {
		t.Error("a kind without a name was registered")
	}
}
