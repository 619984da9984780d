package egresstest

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Banner is what BannerServer's peer writes: text a service that does not
// speak HTTP sends first, which must never be read back.
const Banner = "SSH-2.0-secret-banner"

// RedirectSecret is the query value of RedirectServer's Location, which
// must never be read back either.
const RedirectSecret = "redirect-secret-3f9a"

// BannerServer starts a TCP listener on loopback that writes Banner and a
// CRLF to each connection and closes it, and returns its URL
// ("http://127.0.0.1:port"). It stops when the test ends.
func BannerServer(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			_, _ = conn.Write([]byte(Banner + "\r\n"))
			_ = conn.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return "http://" + ln.Addr().String()
}

// RedirectServer starts an HTTP server that redirects every request to
// target with RedirectSecret in its query, and returns its URL. target is
// typically an address the policy denies (http://10.0.0.1/), so the
// redirect's error would name it.
func RedirectServer(t testing.TB, target string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+"?token="+RedirectSecret, http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
