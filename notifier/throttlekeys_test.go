package notifier

import (
	"testing"

	"github.com/dropstream/dropstream/notifier/subscriber"
)

func TestThrottleKeys_keyOfDestinationCore(t *testing.T) {
	hook := subscriber.Destination{ID: "d1", Kind: subscriber.KindWebhook, Address: "https://example.com/hook"}
	core, err := hook.Core()
	if err != nil {
		t.Fatal(err)
	}
	keys := newThrottleKeys()
	for _, tt := range []struct {
		name string
		dest subscriber.Destination
		want string
	}{
		{"a destination: its core's hash", hook, subscriber.CoreHash(core)},
		{"asked again: the same", hook, subscriber.CoreHash(core)},
		{"another destination of the same core: the same bucket", subscriber.Destination{ID: "d2", Kind: hook.Kind, Address: hook.Address}, subscriber.CoreHash(core)},
		{"an invalid address: its id", subscriber.Destination{ID: "d3", Kind: subscriber.KindWebhook, Address: "not a url"}, "d3"},
		{"the same invalid address of another id: that id", subscriber.Destination{ID: "d4", Kind: subscriber.KindWebhook, Address: "not a url"}, "d4"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := keys.get(tt.dest); got != tt.want {
				t.Errorf("get(%+v) = %q, want %q", tt.dest, got, tt.want)
			}
		})
	}
}
