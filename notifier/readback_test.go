package notifier

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/egress/egresstest"
)

// A webhook on a service that does not speak HTTP, or redirecting to a URL
// with a secret in its query, fails with its class (and status): neither
// the banner nor the redirect's target is in the error, the history
// record or the delivery ledger.
func TestWebhookChannel_failureReadsBackNoBannerNorRedirect(t *testing.T) {
	for _, tc := range []struct {
		name, url, want string
	}{
		{"banner", egresstest.BannerServer(t), "webhook delivery failed (network)"},
		{"redirect", egresstest.RedirectServer(t, "http://10.0.0.1/private"), "webhook delivery failed (http_status): status 302"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wh := newWebhook(t, WebhookConfig{})
			d, _ := newDispatcher(t, wh, DeliveryLedgerConfig{})
			del := delivery("1-0")
			del.Channel, del.Notification = wh.Name(), testNotification(tc.url)
			_, err := d.Deliver(context.Background(), del)
			if err == nil {
				t.Fatal("delivered to a peer that is no webhook receiver")
			}
			hist, _ := del.HistoryRecord(OutcomeFailed, err, time.Now())
			texts := map[string]string{"error": err.Error(), "history record": hist.Error}
			if tc.name == "redirect" { // refused for good: kept in the ledger
				rec, gerr := d.Ledger().Get(context.Background(), d.Ledger().Key(del.HashTag, del.Key))
				if gerr != nil || rec.State != DeliveryRejected {
					t.Fatalf("ledger record %+v, %v; want rejected", rec, gerr)
				}
				texts["ledger record"] = rec.Error
			}
			for what, text := range texts {
				if !strings.Contains(text, tc.want) {
					t.Errorf("%s %q, want %q", what, text, tc.want)
				}
				for _, secret := range []string{"SSH-2.0", "secret-banner", egresstest.RedirectSecret, "10.0.0.1", "malformed HTTP", "127.0.0.1"} {
					if strings.Contains(text, secret) {
						t.Errorf("%s %q reads back %q", what, text, secret)
					}
				}
			}
		})
	}
}
