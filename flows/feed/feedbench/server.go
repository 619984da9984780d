package feedbench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ServerArgs are the arguments of the binary that run Serve: the feed
// server of the bench, in a process of its own so its CPU stays out of the
// flow's figure.
var ServerArgs = []string{"bench", "feed-server"}

// itemsPerFeed is the items of every feed's document.
const itemsPerFeed = 50

// Serve serves every feed's document (feedDoc) on a free loopback port,
// prints the server's base URL as one line to stdout, and serves until
// stdin ends or ctx is done. args are its flags (none today).
func Serve(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench feed-server", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("feedbench: serve: %w", err)
	}
	srv := &http.Server{ReadHeaderTimeout: time.Minute, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, ok := strings.CutPrefix(r.URL.Path, "/f/")
		if _, err := strconv.Atoi(n); !ok || err != nil {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, feedDoc(n))
	})}
	if _, err := fmt.Fprintln(stdout, "http://"+ln.Addr().String()); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _, _ = io.Copy(io.Discard, stdin); cancel() }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// feedDoc is an RSS document of itemsPerFeed items unique to feed n.
func feedDoc(n string) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0"?><rss version="2.0"><channel><title>bench ` + n + `</title>`)
	for i := range itemsPerFeed {
		id := n + "-" + strconv.Itoa(i)
		fmt.Fprintf(&b, `<item><guid>urn:bench:%s</guid><title>Item %s</title><link>https://example.org/%s</link><description>Body of item %s, a few words long.</description><pubDate>Mon, 02 Mar 2026 09:00:00 +0000</pubDate></item>`, id, id, id, id)
	}
	b.WriteString(`</channel></rss>`)
	return b.String()
}
