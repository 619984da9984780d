package main

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/internal/testenv"
)

// benchRow is a row of bench api's table: route, saturation req/s, the
// two latencies, the CPU per request of the server, Redis and the load
// process, and the answers.
var benchRow = regexp.MustCompile(`^\s*((?:GET|POST) \S+)\s+(\d+)\s+([\d.]+) ms\s+([\d.]+) ms\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(.+?)\s*$`)

// selfIsTestBinary points selfCommand, the benches' helper processes, at
// this test binary running main, until t ends.
func selfIsTestBinary(t *testing.T) {
	old := selfCommand
	t.Cleanup(func() { selfCommand = old })
	selfCommand = func(args ...string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), mainArgsVar+"="+strings.Join(args, " "))
		return cmd
	}
}

// TestBenchAPI_loadsEachRouteFromAnotherProcess runs `bench api` with the
// binary's defaults on real Redis, with short phases: every route answers
// 200 and only 200 at saturation (the default limits do not refuse a
// benchmark's load), and each row has its figures.
func TestBenchAPI_loadsEachRouteFromAnotherProcess(t *testing.T) {
	selfIsTestBinary(t)
	var out, errOut strings.Builder
	err := dispatch(t.Context(), []string{"bench", "api", "--redis-url", testenv.RedisURL(t),
		"--phase", "300ms", "--connections", "4", "--rate", "100", "--gauge-messages", "1000"}, &out, &errOut)
	if err != nil {
		t.Fatalf("bench api: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "settings differing from the binary's defaults: --connections=4 --gauge-messages=1000 --phase=300ms --rate=100") ||
		!strings.Contains(out.String(), "gauge: plain go-redis") {
		t.Errorf("header lacks the changed settings or the gauge:\n%s", out.String())
	}
	var routes []string
	for _, line := range strings.Split(out.String(), "\n") {
		m := benchRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		route := m[1]
		routes = append(routes, route)
		perSecond, _ := strconv.Atoi(m[2])
		processUS, _ := strconv.ParseFloat(m[5], 64)
		loadUS, _ := strconv.ParseFloat(m[7], 64)
		if perSecond <= 0 || processUS <= 0 || loadUS <= 0 {
			t.Errorf("%s: %d req/s, %.1f µs of process CPU and %.1f of the load's per request: want all above 0", route, perSecond, processUS, loadUS)
		}
		if !regexp.MustCompile(`^200 × \d+$`).MatchString(m[8]) {
			t.Errorf("%s answered %s at saturation: want 200 only", route, m[8])
		}
	}
	if !regexp.MustCompile(`(?m)^GET /v1/availability\S+: \d+ pages served again while unchanged, [1-9]\d* listed`).MatchString(out.String()) {
		t.Errorf("no line of the list's pages served again and listed:\n%s", out.String())
	}
	want := []string{"GET /v1/availability?state=open", "GET /v1/sources/", "GET /v1/notifications/", "GET /v1/sagas/", "POST /stock/add/"}
	if len(routes) != len(want) {
		t.Fatalf("rows %q, want one for each of %q:\n%s", routes, want, out.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(routes[i], w) {
			t.Errorf("row %d is %s, want %s…", i, routes[i], w)
		}
	}
}
