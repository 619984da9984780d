package avail

import (
	"testing"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/flow"
)

// A transition's event names the state it entered only when the raw state
// flipped: a stable confirmation of an earlier flip is no new opening.
func TestTransitionEvent_changeOnlyOnARawFlip(t *testing.T) {
	for _, tc := range []struct {
		name       string
		t          avail.Transition
		wantChange string
	}{
		{"raw open", avail.Transition{Kind: "open", Raw: true}, "open"},
		{"raw and stable close", avail.Transition{Kind: "close", Raw: true, Stable: true}, "close"},
		{"stable confirmation", avail.Transition{Kind: "open", Stable: true, Notify: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := transitionEvent(tc.t, flow.Entry{ID: "1700000000000-0"})
			if ev.Change != tc.wantChange || ev.Kind != "transition" {
				t.Errorf("event %+v: change %q, want %q", ev, ev.Change, tc.wantChange)
			}
		})
	}
}
