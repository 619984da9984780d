package watch

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/notifier"
)

// validWatcher is a venue webhook watcher that passes Validate.
func validWatcher() Watcher {
	return Watcher{Name: "date night", Provider: "resy", Venue: "v1", Channel: notifier.ChannelWebhook,
		WebhookURL: "https://hooks.example.com/dropstream?x=1"}
}

func TestWatcher_validate(t *testing.T) {
	slotKey := avail.SlotKey("resy", "v1", "2025-07-04", "19:00", 2)
	tests := []struct {
		name    string
		edit    func(*Watcher)
		wantErr string // "" for valid
	}{
		{"valid venue watcher", func(*Watcher) {}, ""},
		{"valid provider watcher", func(w *Watcher) { w.Venue = "" }, ""},
		{"valid slot watcher", func(w *Watcher) { w.Provider, w.Venue, w.Slot = "", "", slotKey }, ""},
		{"valid restaurant key", func(w *Watcher) { w.Slot = avail.RestaurantKey("resy", "v1", "2025-07-04", 2) }, ""},
		{"valid slot with matching provider", func(w *Watcher) { w.Venue, w.Slot = "", slotKey }, ""},
		{"valid log watcher", func(w *Watcher) { w.Channel, w.WebhookURL = notifier.ChannelLog, "" }, ""},
		{"valid dates and parties", func(w *Watcher) {
			w.DateFrom, w.DateTo, w.PartySizes = "2025-07-01", "2025-07-31", []int{2, 4}
		}, ""},
		{"valid same-day range", func(w *Watcher) { w.DateFrom, w.DateTo = "2025-07-01", "2025-07-01" }, ""},
		{"valid given secret", func(w *Watcher) { w.Secret = "0123456789abcdef" }, ""},
		{"valid http url", func(w *Watcher) { w.WebhookURL = "http://127.0.0.1:8080/hook" }, ""},
		{"empty name", func(w *Watcher) { w.Name = "" }, "name"},
		{"long name", func(w *Watcher) { w.Name = strings.Repeat("n", MaxNameLen+1) }, "name"},
		{"control in name", func(w *Watcher) { w.Name = "a\nb" }, "name"},
		{"invalid utf-8 name", func(w *Watcher) { w.Name = "a\xffb" }, "name"},
		{"nothing watched", func(w *Watcher) { w.Provider, w.Venue = "", "" }, "at least one of venue, slot and provider"},
		{"venue without provider", func(w *Watcher) { w.Provider = "" }, "venue requires provider"},
		{"pipe in venue", func(w *Watcher) { w.Venue = "a|b" }, "venue"},
		{"long provider", func(w *Watcher) { w.Provider = strings.Repeat("p", avail.MaxFieldLen+1) }, "provider"},
		{"slot not a key", func(w *Watcher) { w.Slot = "resy|v1" }, "slot"},
		{"slot of a source", func(w *Watcher) { w.Slot = avail.SourceKey("s1") }, "slot"},
		{"slot with brace", func(w *Watcher) { w.Slot = "resy|v{1}|2025-07-04|19:00|2" }, "slot venue"},
		{"slot bad party", func(w *Watcher) { w.Slot = "resy|v1|2025-07-04|19:00|x" }, "slot"},
		{"slot too long", func(w *Watcher) { w.Slot = strings.Repeat("s", 700) }, "slot longer"},
		{"slot of another provider", func(w *Watcher) { w.Venue, w.Slot = "", avail.SlotKey("tock", "v1", "2025-07-04", "19:00", 2) }, "differs"},
		{"slot of another venue", func(w *Watcher) { w.Slot = slotKey; w.Venue = "v2" }, "differs"},
		{"bad date_from", func(w *Watcher) { w.DateFrom = "07/04/2025" }, "date_from"},
		{"bad date_to", func(w *Watcher) { w.DateTo = "2025-13-01" }, "date_to"},
		{"date out of era", func(w *Watcher) { w.DateFrom = "1999-12-31" }, "date_from"},
		{"inverted range", func(w *Watcher) { w.DateFrom, w.DateTo = "2025-07-31", "2025-07-01" }, "before"},
		{"too many party sizes", func(w *Watcher) {
			w.PartySizes = make([]int, MaxPartySizes+1)
			for i := range w.PartySizes {
				w.PartySizes[i] = i + 1
			}
		}, "at most"},
		{"party size zero", func(w *Watcher) { w.PartySizes = []int{0} }, "out of range"},
		{"party size too big", func(w *Watcher) { w.PartySizes = []int{MaxPartySize + 1} }, "out of range"},
		{"party size twice", func(w *Watcher) { w.PartySizes = []int{2, 2} }, "twice"},
		{"unknown channel", func(w *Watcher) { w.Channel = "sms" }, "channel"},
		{"webhook without url", func(w *Watcher) { w.WebhookURL = "" }, "required"},
		{"log with url", func(w *Watcher) { w.Channel = notifier.ChannelLog }, "only for the webhook"},
		{"ftp url", func(w *Watcher) { w.WebhookURL = "ftp://example.com/x" }, "scheme"},
		{"relative url", func(w *Watcher) { w.WebhookURL = "/hook" }, "scheme"},
		{"url without host", func(w *Watcher) { w.WebhookURL = "https:///hook" }, "no host"},
		{"url with credentials", func(w *Watcher) { w.WebhookURL = "https://u:p@example.com/" }, "credentials"},
		{"url with fragment", func(w *Watcher) { w.WebhookURL = "https://example.com/#frag" }, "fragment"},
		{"url too long", func(w *Watcher) { w.WebhookURL = "https://example.com/" + strings.Repeat("a", MaxWebhookURLLen) }, "longer"},
		{"short secret", func(w *Watcher) { w.Secret = "short" }, "secret"},
		{"secret with space", func(w *Watcher) { w.Secret = "0123456789 abcdef" }, "secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := validWatcher()
			tt.edit(&w)
			err := w.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate: nil, want error containing %q", tt.wantErr)
			}
			if !errors.Is(err, ErrInvalidWatcher) {
				t.Errorf("error %v does not wrap ErrInvalidWatcher", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestWatcher_matches(t *testing.T) {
	e := slot("v1", "2025-07-04", "19:00", 2)
	tests := []struct {
		name string
		w    Watcher
		want bool
	}{
		{"provider", Watcher{Provider: "resy"}, true},
		{"other provider", Watcher{Provider: "tock"}, false},
		{"venue", Watcher{Provider: "resy", Venue: "v1"}, true},
		{"other venue", Watcher{Provider: "resy", Venue: "v2"}, false},
		{"slot", Watcher{Slot: e.Key}, true},
		{"other slot", Watcher{Slot: avail.SlotKey("resy", "v1", "2025-07-04", "20:00", 2)}, false},
		{"in range", Watcher{Provider: "resy", DateFrom: "2025-07-01", DateTo: "2025-07-04"}, true},
		{"before range", Watcher{Provider: "resy", DateFrom: "2025-07-05"}, false},
		{"after range", Watcher{Provider: "resy", DateTo: "2025-07-03"}, false},
		{"party listed", Watcher{Provider: "resy", PartySizes: []int{4, 2}}, true},
		{"party not listed", Watcher{Provider: "resy", PartySizes: []int{4}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.w.Matches(e); got != tt.want {
				t.Errorf("Matches = %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("dated watcher and undated entity", func(t *testing.T) {
		undated := avail.Entity{Key: "k", Provider: "resy"}
		if (Watcher{Provider: "resy", DateFrom: "2025-01-01"}).Matches(undated) {
			t.Error("an entity without a date matched a dated watcher")
		}
	})
}

func TestWatcherID_format(t *testing.T) {
	id := newWatcherID(time.Now())
	for _, tt := range []struct {
		id   string
		want bool
	}{
		{id, true}, {"", false}, {"w_123", false}, {strings.ToUpper(id), false},
		{"x_" + id[2:], false}, {id[:29] + "g", false},
	} {
		if got := validID(tt.id); got != tt.want {
			t.Errorf("validID(%q) = %v, want %v", tt.id, got, tt.want)
		}
	}
}
