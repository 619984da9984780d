package fuzz

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/api/apitest"
)

// Failure is one answer that breaks a promise of the server.
type Failure struct {
	// Kind is "server_error", "no_envelope", "contract" or "state_changed".
	Kind string
	// Operation is the documented operation ("POST /v1/feeds").
	Operation string
	// What is the mutation sent.
	What    string
	Request string
	Status  int
	Detail  string
}

func (f Failure) String() string {
	return fmt.Sprintf("%s: %s (%s): %s → %d: %s", f.Kind, f.Operation, f.What, f.Request, f.Status, f.Detail)
}

// Report is what a run did and found.
type Report struct {
	Seed       int64
	Operations int
	// Requests is the number of fuzz requests sent (snapshot reads of
	// the list routes not counted).
	Requests int
	// Refused is the number of requests answered 4xx.
	Refused  int
	Failures []Failure
}

// runner is one run's state.
type runner struct {
	t        testing.TB
	cfg      Config
	contract *apitest.Contract
	base     string
	client   *http.Client
	writes   *writeWatcher     // nil: the keyspace is compared by digests
	digests  map[string]string // by key: the values last seen
	// listsBase are the list routes' answers before the requests since
	// (window: refused ones and safe ones), checked every
	// Config.ListEvery of them.
	listsBase string
	window    []string
	gen       *generator
	listOps   []operation
	report    Report
	reported  map[string]bool
}

// Run fuzzes srv's operations within cfg's budget and returns what it
// found. It fails t only when the run cannot start (an invalid document
// or configuration); the caller reports the failures.
func Run(t testing.TB, srv *api.Server, cfg Config) Report {
	t.Helper()
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	contract := apitest.Document(t, srv)
	ops := operations(contract.Doc, cfg.Skip)
	// Over a real connection: the limits of the HTTP server (413, 431)
	// are part of what a client sees.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("fuzz: serve: %v", err)
		}
	})
	r := &runner{t: t, cfg: cfg, contract: contract, reported: map[string]bool{},
		base:   "http://" + ln.Addr().String(),
		client: &http.Client{Timeout: cfg.RequestTimeout},
		gen: &generator{rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5eed)), bodyLimit: cfg.BodyLimit, seen: map[string][]string{},
			examples: map[string][]map[string]any{}},
		report: Report{Seed: cfg.Seed, Operations: len(ops)}}
	for _, op := range ops {
		// The list routes: paged, no parameter to choose.
		paged := slices.ContainsFunc(op.query, func(q *openapi3.Parameter) bool { return q.Name == "limit" })
		if op.method == http.MethodGet && paged {
			if len(op.pathParams) == 0 && !slices.ContainsFunc(op.query, func(q *openapi3.Parameter) bool { return q.Required }) {
				r.listOps = append(r.listOps, op)
			}
		}
	}
	t.Logf("fuzz: seed %d, budget %s, %d operations (%s=%d %s=%s reproduce this run)",
		cfg.Seed, cfg.Budget, len(ops), EnvSeed, cfg.Seed, EnvBudget, cfg.Budget)
	deadline := time.Now().Add(cfg.Budget)
	// Every operation's systematic cases, interleaved so that a short
	// budget still reaches every operation (its first case runs whatever
	// the budget); then random ones.
	if cfg.Redis != nil && !cfg.DigestKeys {
		r.writes = watchWrites(t, cfg.Redis)
		if r.digests, err = r.keys(); err != nil {
			t.Fatalf("fuzz: snapshot of the keyspace: %v", err)
		}
	}
	r.written()
	r.listsBase = r.lists() // also lists the stored objects the bodies start from
	queues := make([][]fuzzCase, len(ops))
	for i, op := range ops {
		queues[i] = r.gen.systematic(op)
	}
	for step := 0; step == 0 || time.Now().Before(deadline); step++ {
		sent := false
		for i := range ops {
			if step > 0 && !time.Now().Before(deadline) {
				break
			}
			var c fuzzCase
			switch {
			case step < len(queues[i]):
				c = queues[i][step]
			case step%2 == 0:
				c = r.gen.random(ops[i])
			default:
				continue
			}
			r.exec(c)
			sent = true
		}
		if !sent && len(ops) == 0 {
			break
		}
	}
	r.checkLists()
	return r.report
}

// exec sends c and checks the answer and what it stored.
func (r *runner) exec(c fuzzCase) {
	r.t.Helper()
	target := c.url()
	var body io.Reader
	if c.body != nil {
		body = bytes.NewReader(c.body)
	}
	req, err := http.NewRequest(strings.ToUpper(c.op.method), r.base+target, body)
	if err != nil {
		r.t.Fatalf("fuzz: %s %s: %v", c.op.method, target, err)
	}
	if c.contentType != "" {
		req.Header.Set("Content-Type", c.contentType)
	}
	for k, v := range r.cfg.Headers {
		req.Header.Set(k, v)
	}
	res, err := r.do(req)
	req.Body = nil
	r.report.Requests++
	sent := clip(req.Method+" "+target+" "+string(c.body), 400)
	fail := func(kind, detail string) {
		r.fail(Failure{Kind: kind, Operation: c.op.String(), What: c.what, Request: sent, Status: res.Status, Detail: clip(detail, 600)})
	}
	written := r.written()
	refused := func() {
		r.report.Refused++
		if len(written) > 0 {
			fail("state_changed", "stored state changed: Redis keys written: "+clip(strings.Join(written, " "), 400))
		}
		r.inWindow(c.op.String() + " (" + c.what + "): " + clip(sent, 120))
	}
	if err != nil {
		// A server may refuse an oversized body at once and close the
		// connection while the client still writes it.
		if (c.what == whatOversized || len(target) >= r.cfg.HeadLimit) && isReset(err) {
			refused()
			return
		}
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		fail("server_error", "no answer: "+err.Error())
		r.listsBase, r.window = r.lists(), nil
		return
	}
	code, isEnvelope := envelopeCode(res)
	switch {
	case res.Status >= 500 && !(isEnvelope && slices.Contains(r.cfg.AllowedServerErrors, code)):
		fail("server_error", string(res.Body))
	case res.Status >= 400 && !isEnvelope && !(c.op.htmlErrors && strings.HasPrefix(res.Header.Get("Content-Type"), "text/html")):
		fail("no_envelope", fmt.Sprintf("Content-Type %q body %s", res.Header.Get("Content-Type"), res.Body))
	}
	if err := r.contract.Check(context.Background(), req, c.body, res); err != nil {
		fail("contract", err.Error())
	}
	if res.Status >= 400 && res.Status < 500 && !(isEnvelope && slices.Contains(r.cfg.OutcomeCodes, code)) {
		refused()
		return
	}
	if res.Status >= 400 && res.Status < 500 {
		r.report.Refused++
	}
	if res.Status < 300 {
		r.harvest(res.Body)
	}
	if req.Method == http.MethodGet {
		// A safe request must not change the lists either.
		r.inWindow(c.op.String() + " (" + c.what + "): " + clip(sent, 120))
		return
	}
	// The request may have changed what the lists show: a new baseline
	// (the requests since the last check are left unchecked by the
	// lists; the Redis writes of the refused ones were checked one by
	// one).
	r.listsBase, r.window = r.lists(), nil
}

// inWindow adds a request that must not change the lists to those since
// their last check, and checks them every Config.ListEvery.
func (r *runner) inWindow(request string) {
	r.window = append(r.window, request)
	if len(r.window) >= r.cfg.ListEvery {
		r.checkLists()
	}
}

// checkLists compares the list routes' answers with those before the
// requests of the window, and fails naming those requests when they
// differ.
func (r *runner) checkLists() {
	if len(r.window) == 0 {
		return
	}
	now := r.lists()
	if d := listChanges(r.listsBase, now); d != "" {
		r.fail(Failure{Kind: "state_changed", Operation: "list routes", What: "after refused or safe requests",
			Request: clip(strings.Join(r.window, " | "), 1200), Detail: d})
	}
	r.listsBase, r.window = now, nil
}

// isReset reports whether err is the connection closed under a request.
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF)
}

// do sends req to the server.
func (r *runner) do(req *http.Request) (apitest.Response, error) {
	res, err := r.client.Do(req)
	if err != nil {
		return apitest.Response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return apitest.Response{Status: res.StatusCode, Header: res.Header, Body: b}, err
}

// fail records f once per kind, operation and mutation.
func (r *runner) fail(f Failure) {
	key := f.Kind + "|" + f.Operation + "|" + f.What
	if r.reported[key] || len(r.report.Failures) >= MaxFailures {
		return
	}
	r.reported[key] = true
	r.report.Failures = append(r.report.Failures, f)
}

// envelopeCode returns the code of a JSON error envelope answer.
func envelopeCode(res apitest.Response) (string, bool) {
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		return "", false
	}
	var env struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(res.Body, &env) != nil || env.Error == nil || env.Error.Code == "" || env.Error.Message == "" {
		return "", false
	}
	return env.Error.Code, true
}

// harvest remembers the string values of an answer's fields, by name, as
// candidate path parameters of later requests.
func (r *runner) harvest(body []byte) {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return
	}
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		if depth > 4 {
			return
		}
		switch x := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(x) {
				if s, ok := x[k].(string); ok && s != "" && len(s) < 200 {
					seen := r.gen.seen[k]
					if !slices.Contains(seen, s) && len(seen) < 32 {
						r.gen.seen[k] = append(seen, s)
					}
				}
				walk(x[k], depth+1)
			}
		case []any:
			for _, e := range x {
				walk(e, depth+1)
			}
		}
	}
	walk(v, 0)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("… (%d bytes)", len(s))
}
