package notifier

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// captured is one request a receiver got.
type captured struct {
	header http.Header
	body   []byte
}

// sendCaptured sends n on a webhook channel of cfg to a test receiver and
// returns the request it got.
func sendCaptured(t *testing.T, cfg WebhookConfig, n Notification) captured {
	t.Helper()
	got := make(chan captured, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- captured{r.Header.Clone(), body}
	}))
	t.Cleanup(srv.Close)
	n.Recipient.Address = srv.URL
	if err := newWebhook(t, cfg).Send(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	return <-got
}

// The webhook channel signs as the Standard Webhooks specification says:
// its own libraries (Go, and the npm package run by Node) verify what a
// receiver gets, for a "whsec_<base64>" secret (the subscriber store's
// form) and, through their raw constructors, for any other secret. The
// webhook-id is the notification's stable id; the X-Dropstream headers
// only go out when asked for.
func TestWebhookChannel_StandardWebhooksVerifyWithTheSpecLibraries(t *testing.T) {
	for _, tc := range []struct {
		name, secret string
		raw          bool // not whsec_<base64>: receivers key with the secret's bytes
		legacy       bool
	}{
		{"whsec base64 secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", false, false},
		{"store-made secret (whsec_ and 64 hex)", "whsec_" + strings.Repeat("0123456789abcdef", 4), false, false},
		{"other secret, raw key", "my own secret: not base64!", true, false},
		{"legacy headers asked for", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testNotification("")
			n.Recipient.Secret = tc.secret
			req := sendCaptured(t, WebhookConfig{LegacySignature: tc.legacy}, n)
			if id := req.header.Get("webhook-id"); id != n.EventID {
				t.Fatalf("webhook-id %q, want the notification's id %q", id, n.EventID)
			}
			var wh *standardwebhooks.Webhook
			var err error
			if tc.raw {
				wh, err = standardwebhooks.NewWebhookRaw([]byte(tc.secret))
			} else {
				wh, err = standardwebhooks.NewWebhook(tc.secret)
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := wh.Verify(req.body, req.header); err != nil {
				t.Errorf("the Go library: %v", err)
			}
			if err := VerifyWebhook(tc.secret, req.header, req.body, time.Now(), 0); err != nil {
				t.Errorf("VerifyWebhook: %v", err)
			}
			if err := verifyWithNode(t, tc.secret, tc.raw, req); err != nil {
				t.Errorf("the npm package: %v", err)
			}
			legacy := req.header.Get(HeaderSignature)
			switch {
			case !tc.legacy && (legacy != "" || req.header.Get(HeaderEventID) != ""):
				t.Errorf("X-Dropstream headers sent without being asked for: %q", legacy)
			case tc.legacy:
				if err := VerifySignature(tc.secret, legacy, req.body, time.Now(), 0); err != nil {
					t.Errorf("legacy signature: %v", err)
				}
			}
			// A body changed on the way fails.
			if err := wh.Verify(append(req.body, ' '), req.header); err == nil {
				t.Error("the Go library verified a changed body")
			}
		})
	}
}

// npmPackage is the specification's npm package the test verifies with.
const npmPackage = "standardwebhooks@1.1.1"

// verifyWithNode verifies req with the npm package standardwebhooks, run
// by node; the package is installed once into the user's cache.
func verifyWithNode(t *testing.T, secret string, raw bool, req captured) error {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, "dropstream-test", strings.ReplaceAll(npmPackage, "@", "-"))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "standardwebhooks", "package.json")); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--prefix", dir, npmPackage)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install %s: %v\n%s", npmPackage, err, out)
		}
	}
	headers := map[string]string{}
	for k := range req.header {
		headers[strings.ToLower(k)] = req.header.Get(k)
	}
	in, err := json.Marshal(map[string]any{"secret": secret, "raw": raw, "headers": headers, "body": string(req.body)})
	if err != nil {
		t.Fatal(err)
	}
	const script = `
const { Webhook } = require("standardwebhooks");
let s = "";
process.stdin.on("data", d => s += d).on("end", () => {
  const r = JSON.parse(s);
  const wh = r.raw ? new Webhook(r.secret, { format: "raw" }) : new Webhook(r.secret);
  wh.verify(r.body, r.headers);
  console.log("verified");
});`
	cmd := exec.Command("node", "-e", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "verified") {
		return &nodeError{out: string(out), err: err}
	}
	return nil
}

type nodeError struct {
	out string
	err error
}

func (e *nodeError) Error() string { return "node: " + e.out }
