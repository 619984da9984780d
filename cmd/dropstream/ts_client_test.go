package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// tsClientDir is the TypeScript client's package.
const tsClientDir = "../../client/ts"

// npm runs npm with args in the TypeScript client's folder.
func npm(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("npm", args...)
	cmd.Dir = tsClientDir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm %v: %v\n%s", args, err, out)
	}
}

// TestTypeScriptClient_callsTheLiveAPI generates the TypeScript client's
// types from client/openapi.json, type-checks and compiles the client and
// its smoke script with tsc, and runs the script in Node against a live
// server: each call must answer its documented status and body.
func TestTypeScriptClient_callsTheLiveAPI(t *testing.T) {
	if _, err := os.Stat(filepath.Join(tsClientDir, "node_modules", ".package-lock.json")); err != nil {
		npm(t, "ci", "--no-audit", "--no-fund")
	}
	npm(t, "run", "build") // openapi-typescript, then tsc

	o := newGeneratedClientEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = o.srv.App().Listener(ln) }()
	t.Cleanup(func() { _ = o.srv.App().Shutdown() })

	cmd := exec.Command("node", "dist/test/smoke.js", "http://"+ln.Addr().String(), keyA)
	cmd.Dir = tsClientDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node smoke.js: %v\n%s", err, stderr.String())
	}
	type answer struct {
		Status int            `json:"status"`
		Body   map[string]any `json:"body"`
	}
	got := map[string]answer{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var line struct {
			Op string `json:"op"`
			answer
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("smoke line %q: %v", sc.Text(), err)
		}
		got[line.Op] = line.answer
	}
	subscriberID, _ := got["POST /v1/subscribers"].Body["id"].(string)
	userID, _ := got["POST /payment/create_user"].Body["user_id"].(string)
	for _, tc := range []struct {
		op     string
		status int
		check  func(body map[string]any) bool
		want   string
	}{
		{"GET /healthz", http.StatusOK, nil, ""},
		{"POST /v1/subscribers", http.StatusCreated, func(b map[string]any) bool { return subscriberID != "" && b["name"] == "ts-client" },
			"the subscriber named ts-client with an id"},
		{"GET /v1/subscribers/{id}", http.StatusOK, func(b map[string]any) bool { return b["id"] == subscriberID },
			"the subscriber just created"},
		{"GET /v1/subscribers", http.StatusOK, func(b map[string]any) bool {
			items, _ := b["items"].([]any)
			for _, it := range items {
				if m, _ := it.(map[string]any); m["id"] == subscriberID {
					return true
				}
			}
			return false
		}, "a page listing the subscriber"},
		{"POST /payment/create_user", http.StatusOK, func(map[string]any) bool { return userID != "" }, "a user_id"},
		{"POST /payment/add_funds/{user_id}/{amount}", http.StatusOK, nil, ""},
		{"GET /payment/find_user/{user_id}", http.StatusOK, func(b map[string]any) bool { return b["user_id"] == userID && b["credit"] == 250.0 },
			"the user with a credit of 250"},
		{"GET /v1/subscribers/{id} (missing)", http.StatusNotFound, func(b map[string]any) bool {
			return b["code"] == "subscriber_not_found" && b["message"] != ""
		}, "the error envelope's code subscriber_not_found and a message"},
		{"DELETE /v1/subscribers/{id}", http.StatusNoContent, nil, ""},
	} {
		a, ok := got[tc.op]
		switch {
		case !ok:
			t.Errorf("%s: not called (output:\n%s)", tc.op, out)
		case a.Status != tc.status:
			t.Errorf("%s: status %d, want %d (body %v)", tc.op, a.Status, tc.status, a.Body)
		case tc.check != nil && !tc.check(a.Body):
			t.Errorf("%s: body %v, want %s", tc.op, a.Body, tc.want)
		}
	}
}
