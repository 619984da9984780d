package deploy

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/dropstream/dropstream/internal/testenv"
)

// repoRoot is the repository root, relative to this package.
const repoRoot = ".."

// loadCompose parses compose.yaml and returns its services.
func loadCompose(t *testing.T) (doc map[string]any, services map[string]map[string]any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := parseYAML(string(b))
	if err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	doc = v.(map[string]any)
	services = map[string]map[string]any{}
	for name, s := range doc["services"].(map[string]any) {
		services[name] = s.(map[string]any)
	}
	return doc, services
}

// isDropstream reports whether a service runs the dropstream image.
func isDropstream(s map[string]any) bool {
	_, build := s["build"]
	return build || s["image"] == "dropstream:local"
}

func strs(v any) []string {
	var out []string
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			out = append(out, x.(string))
		}
	case string:
		out = append(out, v)
	}
	return out
}

func TestCompose_servicesOfTheStack(t *testing.T) {
	doc, services := loadCompose(t)
	for _, want := range []string{"redis", "clickhouse", "jaeger", "prometheus", "grafana", "migrate", "api"} {
		if _, ok := services[want]; !ok {
			t.Errorf("service %s missing", want)
		}
	}
	if cmd := strings.Join(strs(services["redis"]["command"]), " "); !strings.Contains(cmd, "--appendonly yes") ||
		!strings.HasPrefix(services["redis"]["image"].(string), "redis:7") {
		t.Errorf("redis: %v %q, want Redis 7 with --appendonly yes", services["redis"]["image"], cmd)
	}
	volumes, _ := doc["volumes"].(map[string]any)
	var stageServices int
	for name, s := range services {
		for _, dep := range dependsOn(s) {
			if _, ok := services[dep]; !ok {
				t.Errorf("%s depends on unknown service %s", name, dep)
			}
		}
		for _, v := range strs(s["volumes"]) {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") {
				if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
					t.Errorf("%s mounts %s: %v", name, src, err)
				}
			} else if _, ok := volumes[src]; !ok {
				t.Errorf("%s mounts named volume %s, not declared under volumes", name, src)
			}
		}
		if isDropstream(s) && strs(s["command"])[0] == "run" {
			stageServices++
		}
	}
	if stageServices < 4 {
		t.Errorf("%d dropstream run services, want the stages as separate services", stageServices)
	}
}

func dependsOn(s map[string]any) []string {
	switch d := s["depends_on"].(type) {
	case []any:
		return strs(d)
	case map[string]any:
		var out []string
		for k := range d {
			out = append(out, k)
		}
		return out
	}
	return nil
}

var (
	dropstreamVarRe = regexp.MustCompile(`"(DROPSTREAM_[A-Z0-9_]+)"`)
	otelVarRe       = regexp.MustCompile(`\bOTEL_[A-Z0-9_]+`)
	commandRe       = regexp.MustCompile(`\{"([a-z]+)", "`)
)

// TestCompose_dropstreamServicesSetOnlyVariablesItReads checks the
// environment and command of every dropstream service against the code:
// DROPSTREAM_* variables named in the binary, OTEL_* variables that the
// otel package documents it honours, and commands of cmd/dropstream.
func TestCompose_dropstreamServicesSetOnlyVariablesItReads(t *testing.T) {
	_, services := loadCompose(t)
	src := goSource(t)
	read := map[string]bool{}
	for _, m := range dropstreamVarRe.FindAllStringSubmatch(src, -1) {
		if !strings.HasPrefix(m[1], "DROPSTREAM_TEST_") {
			read[m[1]] = true
		}
	}
	otelSrc := readFiles(t, filepath.Join(repoRoot, "otel", "*.go"))
	for _, v := range otelVarRe.FindAllString(otelSrc, -1) {
		read[v] = true
	}
	mainSrc := readFiles(t, filepath.Join(repoRoot, "cmd", "dropstream", "main.go"))
	var commands []string
	for _, m := range commandRe.FindAllStringSubmatch(mainSrc, -1) {
		commands = append(commands, m[1])
	}
	n := 0
	for name, s := range services {
		if !isDropstream(s) {
			continue
		}
		n++
		env, _ := s["environment"].(map[string]any)
		for k := range env {
			if !read[k] {
				t.Errorf("service %s sets %s, which dropstream does not read", name, k)
			}
		}
		cmd := strs(s["command"])
		if len(cmd) == 0 || !slices.Contains(commands, cmd[0]) {
			t.Errorf("service %s: command %v is not one of %v", name, cmd, commands)
		}
		// TestCompose_runsEveryStageAndServiceOfTheBinary checks the names.
		stages, _ := env["DROPSTREAM_STAGES"].(string)
		if cmd[0] == "run" && stages == "" {
			t.Errorf("service %s runs every stage: name them in DROPSTREAM_STAGES", name)
		}
	}
	if n == 0 {
		t.Fatal("no dropstream service")
	}
}

func readFiles(t *testing.T, glob string) string {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no files (%v)", glob, err)
	}
	var b strings.Builder
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(src)
	}
	return b.String()
}

func TestCompose_prometheusScrapesEveryDropstreamService(t *testing.T) {
	_, services := loadCompose(t)
	b, err := os.ReadFile("prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := parseYAML(string(b))
	if err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	var targets []string
	for _, sc := range doc.(map[string]any)["scrape_configs"].([]any) {
		sc := sc.(map[string]any)
		if sc["metrics_path"] != "/metrics" {
			t.Errorf("scrape config %v: want metrics_path /metrics", sc["job_name"])
		}
		for _, st := range sc["static_configs"].([]any) {
			targets = append(targets, strs(st.(map[string]any)["targets"])...)
		}
	}
	for name, s := range services {
		if isDropstream(s) && strs(s["command"])[0] == "run" && !slices.Contains(targets, name+":8080") {
			t.Errorf("Prometheus does not scrape %s:8080", name)
		}
	}
	for _, tg := range targets {
		host, _, _ := strings.Cut(tg, ":")
		if s, ok := services[host]; !ok || !isDropstream(s) {
			t.Errorf("Prometheus scrapes %s, which is not a dropstream service", tg)
		}
	}
	if g := strings.Join(strs(services["grafana"]["volumes"]), " "); !strings.Contains(g, "./deploy/grafana/provisioning:/etc/grafana/provisioning") ||
		!strings.Contains(g, "./deploy/grafana/dashboards:/var/lib/grafana/dashboards") {
		t.Errorf("grafana volumes %q: want the provisioning and the dashboards", g)
	}
}

var goBuildRe = regexp.MustCompile(`\bgo build\b.*\s(\./\S+)\s*$`)

// TestDockerfile_buildsTheBinaryAsNonRoot checks the Dockerfile statically
// (multi-stage, non-root final stage), that its go build names the
// binary's main package, and that the package graph of that build
// (CGO_ENABLED=0) resolves.
func TestDockerfile_buildsTheBinaryAsNonRoot(t *testing.T) {
	_, services := loadCompose(t)
	for name, s := range services {
		if b, ok := s["build"].(map[string]any); ok {
			if _, err := os.Stat(filepath.Join(repoRoot, b["context"].(string), b["dockerfile"].(string))); err != nil {
				t.Errorf("service %s builds from a missing Dockerfile: %v", name, err)
			}
		}
	}
	f, err := os.Open(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var froms int
	var user, pkg string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "FROM "):
			froms++
			user = ""
		case strings.HasPrefix(line, "USER "):
			user = strings.TrimSpace(strings.TrimPrefix(line, "USER "))
		case strings.HasPrefix(line, "RUN ") && goBuildRe.MatchString(line):
			pkg = goBuildRe.FindStringSubmatch(line)[1]
		}
	}
	if froms < 2 {
		t.Errorf("%d FROM lines, want a multi-stage build", froms)
	}
	if u, _, _ := strings.Cut(user, ":"); u == "" || u == "root" || u == "0" {
		t.Errorf("final stage USER %q, want a non-root user", user)
	}
	if pkg == "" {
		t.Fatal("no RUN go build ... ./pkg line")
	}
	out, err := exec.Command("go", "list", "-C", repoRoot, "-f", "{{.Name}} {{.ImportPath}}", pkg).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "main ") {
		t.Fatalf("go list %s: %s %v, want a main package", pkg, out, err)
	}
	// Every package the build needs must resolve with cgo off, as the
	// Dockerfile builds (a full build would take minutes on a loaded CI
	// machine; go list checks the same graph).
	cmd := exec.Command("go", "list", "-C", repoRoot, "-deps", "-f", "{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}", pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("CGO_ENABLED=0 go list -deps %s: %v\n%s", pkg, err, out)
	}
}

// parseYAML decodes a YAML document as plain values: mappings
// map[string]any, sequences []any, and every scalar its text.
func parseYAML(src string) (any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	return plainYAML(doc.Content[0]), nil
}

func plainYAML(n *yaml.Node) any {
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			m[n.Content[i].Value] = plainYAML(n.Content[i+1])
		}
		return m
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			s = append(s, plainYAML(c))
		}
		return s
	case yaml.AliasNode:
		return plainYAML(n.Alias)
	}
	return n.Value
}

// exampleStages are stages of the binary that the stack leaves out on
// purpose: the sample flow is a runtime example with no producer of its
// own.
var exampleStages = map[string]bool{"sample-enrich": true, "sample-sink": true}

// TestCompose_runsEveryStageAndServiceOfTheBinary asks the binary for every
// stage and service it has (`run --list-stages`, with ClickHouse configured
// so the analytics and history stages are listed) and checks that some
// dropstream service of the stack runs each one, so that no flow's stream
// is left without its consumers (a checkout answered by the API but never
// processed, say).
func TestCompose_runsEveryStageAndServiceOfTheBinary(t *testing.T) {
	_, services := loadCompose(t)
	run := map[string][]string{} // stage → compose services running it
	for name, s := range services {
		env, _ := s["environment"].(map[string]any)
		stages, _ := env["DROPSTREAM_STAGES"].(string)
		for st := range strings.SplitSeq(stages, ",") {
			if st = strings.TrimSpace(st); st != "" {
				run[st] = append(run[st], name)
			}
		}
	}
	known := map[string]bool{}
	for _, st := range binaryStages(t) {
		known[st.Name] = true
		if len(run[st.Name]) == 0 && !exampleStages[st.Name] {
			t.Errorf("no service of compose.yaml runs the %s %s", st.Kind, st.Name)
		}
	}
	for st, by := range run {
		if !known[st] {
			t.Errorf("service %v runs %q, which the binary does not have", by, st)
		}
	}
}

// listedStage is one line of `dropstream run --list-stages`.
type listedStage struct {
	Name, Kind, Flow, Topic, Group string
	Partitions                     int
}

// binaryStages asks the binary for every stage and service it has (`run
// --list-stages`, with ClickHouse configured so the analytics and history
// stages are listed).
func binaryStages(t *testing.T) []listedStage {
	t.Helper()
	cmd := exec.Command("go", "run", "./cmd/dropstream", "run", "--list-stages", "--api-addr", "",
		"--clickhouse-dsn", testenv.ClickHouseDSN(t))
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "DROPSTREAM_REDIS_URL=") // the embedded Redis
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dropstream run --list-stages: %v", err)
	}
	var stages []listedStage
	for line := range strings.Lines(string(out)) {
		var st listedStage
		if err := json.Unmarshal([]byte(line), &st); err != nil {
			t.Fatalf("--list-stages line %q: %v", line, err)
		}
		stages = append(stages, st)
	}
	if len(stages) < 20 {
		t.Fatalf("--list-stages listed %d stages and services; want every one of the binary:\n%s", len(stages), out)
	}
	return stages
}
