package collector_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector"
	"github.com/dropstream/dropstream/collector/provider"
	"github.com/dropstream/dropstream/collector/simulator"
	"github.com/dropstream/dropstream/internal/egress"
)

// secretBody is what a peer answers with its error status: it must never
// be read back through a run, the source's health or a transition.
const secretBody = "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY internal-host db01.corp"

func TestCollector_failedRunKeepsStatusAndClassNotTheBody(t *testing.T) {
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{DownAfter: 1})
	src := e.source("s", provider.Resy, scopeA)
	src.BaseURL = startServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, secretBody)
	}))
	e.upsert(src)
	if err := e.c.PollOnce(context.Background(), "s"); err != nil {
		t.Fatal(err)
	}
	runs := e.runs()
	if len(runs) != 1 || runs[0].Status != avail.StatusFailed || runs[0].HTTPStatus != 500 {
		t.Fatalf("runs %+v, want one failed run with HTTP 500", runs)
	}
	h, _ := e.c.Health("s")
	trs := e.transitions()
	if len(trs) != 1 {
		t.Fatalf("%d transitions, want the source going down", len(trs))
	}
	for what, text := range map[string]string{"run error": runs[0].Error, "health last error": h.LastError,
		"transition error": trs[0].Entity.Attrs["error"]} {
		if strings.Contains(text, "AWS_SECRET") || strings.Contains(text, "db01") {
			t.Errorf("%s %q reads back the peer's body", what, text)
		}
		if !strings.Contains(text, "HTTP 500") || !strings.Contains(text, string(egress.ClassHTTP5xx)) {
			t.Errorf("%s %q, want the status and the class %s", what, text, egress.ClassHTTP5xx)
		}
	}
}

// The default policy refuses a provider on loopback: the run fails as
// denied, without reaching it.
func TestCollector_defaultEgressRefusesLoopbackProvider(t *testing.T) {
	reached := false
	base := startServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
	e := newEnv(t, simulator.Config{}, collector.CollectorConfig{Egress: egress.Default()})
	src := e.source("s", provider.Resy, scopeA)
	src.BaseURL = base
	e.upsert(src)
	if err := e.c.PollOnce(context.Background(), "s"); err != nil {
		t.Fatal(err)
	}
	runs := e.runs()
	if len(runs) != 1 || runs[0].Status != avail.StatusFailed || runs[0].Error != string(egress.ClassDenied) {
		t.Fatalf("runs %+v, want one failed run of class denied", runs)
	}
	if reached {
		t.Error("the loopback provider was reached")
	}
}
