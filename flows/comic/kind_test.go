package comic_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/comic"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier/subscriber"
	"github.com/dropstream/dropstream/stream"
)

// New registers the comic_notify kind on the notifier flow: a "url:" core
// like a webhook's, sent over the webhook channel, with a secret; an
// unknown kind's error then names it with the built-in ones, and an
// endpoint subscribed as a webhook cannot be subscribed again as a
// comic_notify destination.
func TestNew_registersTheNotifyKind(t *testing.T) {
	ctx := t.Context()
	rdb := testenv.Dial(t, testenv.RedisURL(t))
	deps := flow.Deps{Redis: rdb, Publisher: stream.NewPublisher(rdb, stream.Telemetry{}), Settings: flow.Settings{Partitions: 2}}
	deps, _, nf := buildBefore(t, deps)
	for range 2 { // a flow built twice in one process registers twice
		if _, err := comic.New(ctx, deps); err != nil {
			t.Fatal(err)
		}
	}
	if comic.KindNotify != "comic_notify" {
		t.Errorf("KindNotify %q: stored with every destination, it never changes", comic.KindNotify)
	}
	d := subscriber.Destination{Kind: comic.KindNotify, Address: "https://comic.test/notify"}
	k, ok := subscriber.LookupKind(comic.KindNotify)
	if core, err := d.Core(); err != nil || core != "url:https://comic.test/notify" || d.Channel() != "webhook" || !ok || !k.Secret {
		t.Errorf("%s: core %q %v, channel %q, kind %+v", comic.KindNotify, core, err, d.Channel(), k)
	}
	_, err := subscriber.Destination{Kind: "fax", Address: "x"}.Core()
	if !errors.Is(err, subscriber.ErrInvalid) || !strings.HasSuffix(err.Error(), `destination kind "fax": want email, webhook, slack or comic_notify`) {
		t.Errorf("unknown kind: %v", err)
	}
	hook := subscriber.Subscriber{Name: "Alice", Destinations: []subscriber.Destination{{Kind: subscriber.KindWebhook, Address: "https://hooks.example.com:443/a/"}}}
	if _, err := nf.Subscribers().Create(ctx, hook); err != nil {
		t.Fatal(err)
	}
	dupURL := subscriber.Subscriber{Name: "Mallory", Destinations: []subscriber.Destination{{Kind: comic.KindNotify, Address: "HTTPS://HOOKS.example.com/a"}}}
	if _, err := nf.Subscribers().Create(ctx, dupURL); !errors.Is(err, subscriber.ErrDuplicate) {
		t.Fatalf("duplicate url: %v, want ErrDuplicate", err)
	}
}
