package feed_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/feed"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/stream"
)

// New takes the notifier's pieces from the notifier flow, built before it,
// and refuses to be built without it, naming it.
func TestNew_needsTheNotifierFlow(t *testing.T) {
	rdb := testenv.Dial(t, "redis://"+miniredis.RunT(t).Addr())
	deps := flow.Deps{Redis: rdb, Publisher: stream.NewPublisher(rdb, stream.Telemetry{}),
		Settings: flow.Settings{Partitions: 2, PublicURL: flow.DefaultPublicURL}}
	_, err := feed.New(t.Context(), deps)
	if !errors.Is(err, flow.ErrNotBuilt) || !strings.Contains(err.Error(), `"notifier"`) {
		t.Errorf("New without the notifier flow = %v, want ErrNotBuilt naming the notifier", err)
	}
	nf, err := notifier.New(t.Context(), deps)
	if err != nil {
		t.Fatal(err)
	}
	deps.Flows = func(name string) (flow.Flow, bool) { return nf, name == notifier.Name }
	f, err := feed.New(t.Context(), deps)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Describe().Validate(feed.Name); err != nil {
		t.Errorf("Validate: %v", err)
	}
}
