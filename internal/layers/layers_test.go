package layers_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/internal/layers"
)

const module = "github.com/dropstream/dropstream/"

// known are imports that break the rule today, each to be removed by the
// change that moves it; the test fails when one is fixed and still listed.
var known = map[string]bool{}

// Every package's imports (not its tests') follow the layer rule.
func TestLayers_importsPointDown(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		from := strings.TrimPrefix(fields[0], module)
		for _, imp := range fields[1:] {
			to := strings.TrimPrefix(imp, module)
			why := layers.Check(from, to)
			if why == "" {
				continue
			}
			key := from + " -> " + to
			seen[key] = true
			if !known[key] {
				t.Errorf("%s imports %s: %s", from, to, why)
			}
		}
	}
	for k := range known {
		if !seen[k] {
			t.Errorf("%s follows the rule now: remove it from known", k)
		}
	}
}

// The notifier and the append path every flow's history uses link no
// flow: no package under avail or flows/ is among their dependencies.
func TestLayers_notifierLinksNoFlow(t *testing.T) {
	roots := []string{module + "notifier/...", module + "writer/sink", module + "writer/flowhistory"}
	cmd := exec.Command("go", append([]string{"list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`}, roots...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	roots = roots[:0]
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		roots = append(roots, fields[0])
		for _, dep := range fields[1:] {
			rel, ok := strings.CutPrefix(dep, module)
			if ok && (rel == "avail" || strings.HasPrefix(rel, "avail/") || strings.HasPrefix(rel, "flows/")) {
				t.Errorf("%s links %s", fields[0], dep)
			}
		}
	}
	if !slices.Contains(roots, module+"notifier") || !slices.Contains(roots, module+"writer/sink") {
		t.Fatalf("go list listed %v, want the notifier and writer/sink among them", roots)
	}
}

func TestCheck_rules(t *testing.T) {
	tests := []struct {
		from, to string
		ok       bool
	}{
		{"stream", "otel", true},
		{"api", "stream", true},
		{"api", "notifier", false},
		{"api", "flows/offer", false},
		{"flow", "api", true},
		{"stream", "flow", false},
		{"collector", "diff", false},
		{"notifier/history", "writer", false},
		{"notifier/history", "writer/sink", true},
		{"notifier", "writer/flowhistory", true},
		{"notifier", "diff", false},
		{"notifier/email", "notifier", true},
		{"notifier", "avail", false},
		{"writer", "avail", true},
		{"writer/sink", "avail", false},
		{"writer/flowhistory", "writer/sink", true},
		{"flows/comic", "flows/checkout", true},
		{"flows/comic", "flows/checkout/httpapi", false},
		{"flows/comic/httpapi", "flows/comic", true},
		{"flows/comic", "api", false},
		{"flows/comic/httpapi", "api", true},
		{"flows/feed", "github.com/gofiber/fiber/v2", false},
		{"flows/feed/httpapi", "github.com/gofiber/fiber/v2", true},
		{"flows/checkout/checkoutbench", "api", true},
		{"cmd/dropstream", "flows/comic/httpapi", true},
		{"notifier", "flows/comic", false},
	}
	for _, tt := range tests {
		t.Run(tt.from+"->"+tt.to, func(t *testing.T) {
			if why := layers.Check(tt.from, tt.to); (why == "") != tt.ok {
				t.Errorf("Check(%q, %q) = %q, want ok %v", tt.from, tt.to, why, tt.ok)
			}
		})
	}
}
