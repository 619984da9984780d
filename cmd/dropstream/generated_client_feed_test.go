package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/feed"
	"github.com/dropstream/dropstream/flows/feed/poll"
	"github.com/dropstream/dropstream/internal/testenv"
)

// rssDoc is an RSS feed of items named by guids that advertises its hub
// and itself (rel="hub", rel="self") at base.
func rssDoc(base string, guids ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0"?><rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel><title>served</title>`+
		`<atom:link rel="hub" href="%s/hub"/><atom:link rel="self" href="%s/feed.xml"/>`, base, base)
	for _, g := range guids {
		fmt.Fprintf(&b, `<item><guid>urn:served:%s</guid><title>Item %s</title><link>https://example.org/%s</link></item>`, g, g, g)
	}
	b.WriteString(`</channel></rss>`)
	return b.String()
}

// servedFeed serves a feed of three items that advertises a WebSub hub,
// which accepts every subscription request. The feed flow stores the feed,
// one poll finds its items (unassigned for an hour) and asks the hub for
// pushes. ps gets the feed,
// an item, and the subscription's callback token, topic and secret.
func servedFeed(t *testing.T, o *ownership, ps params) {
	fl := appFlow[*feed.Flow](t, o)
	asked := make(chan url.Values, 4)
	var base string
	mux := http.NewServeMux()
	mux.HandleFunc("/feed.xml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		_, _ = io.WriteString(w, rssDoc(base, "a", "b", "c"))
	})
	mux.HandleFunc("/hub", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		asked <- r.PostForm
		w.WriteHeader(http.StatusAccepted)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	base = srv.URL
	if err := fl.Egress().Permit(strings.TrimPrefix(srv.URL, "http://")); err != nil {
		t.Fatal(err)
	}
	fd, _, err := fl.Store().PutFeed(t.Context(), feed.Feed{URL: srv.URL + "/feed.xml", IncludeExisting: true, MinDelayMinutes: 60, MaxDelayMinutes: 60})
	if err != nil {
		t.Fatal(err)
	}
	poller, err := fl.NewPoller(feed.PollerConfig{Fetch: poll.Config{Egress: fl.Egress()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := poller.PollOnce(t.Context(), fd); err != nil {
		t.Fatal(err)
	}
	var form url.Values
	select {
	case form = <-asked:
	default:
		t.Fatal("the poll of a feed advertising a hub asked the hub nothing")
	}
	testenv.WaitFor(t, time.Minute, func() bool {
		items, err := fl.Items(t.Context(), fd.ID, 0, 10)
		if err == nil && len(items) > 0 {
			ps["/v1/feeds/{id}/items/{iid}"] = items[0].IID
		}
		return ps["/v1/feeds/{id}/items/{iid}"] != ""
	}, "an item of the served feed stored")
	ps["/v1/feeds/{id}"] = fd.ID
	ps["/v1/websub/{id}"] = fd.ID
	ps["/v1/websub/{id}/{token}"] = path.Base(form.Get("hub.callback"))
	ps["topic"] = url.QueryEscape(form.Get("hub.topic"))
	ps["secret"] = form.Get("hub.secret")
	ps["base"] = base
}

// signedPush makes the request a hub's push of a new item, signed with
// the subscription's secret.
func signedPush(ps params, req *http.Request) {
	body := []byte(rssDoc(ps["base"], "a", "b", "c", "d"))
	mac := hmac.New(sha256.New, []byte(ps["secret"]))
	mac.Write(body)
	req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	req.Header.Set("Content-Type", "application/rss+xml")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
}
