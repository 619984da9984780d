package e2e

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/sample"
	"github.com/dropstream/dropstream/flows/sample/sampletest"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// clusterScenarios drive dropstream's code on a private Redis Cluster (its
// node list is the argument). TestCluster_scenariosRunEveryScript
// runs them all, then checks that every Lua script of the module ran there.
// To cover a new script, add a scenario here that makes it run on the
// cluster and checks its outcome (or extend an existing one).
var clusterScenarios = []struct {
	name string
	run  func(t *testing.T, nodes string)
}{
	// diff, projection, sessions, watchers and deliveries, with the exact
	// checks of TestAvailability_simulatorToWebhook.
	{"availability pipeline", simulatorToWebhook},
	{"ledger effects", ledgerEffects},
	{"sample flow", sampleFlow},
	{"checkout saga", checkoutSaga},
	{"checkout cancel", checkoutCancel},
	{"comic flow", comicFlow},
	{"offer search", offerSearch},
	{"notifier stores", notifierStores},
	{"notifier delivery", notifierDelivery},
	{"feed flow", feedFlow},
	{"projection sweep", projectionSweep},
	{"watcher update", watcherUpdate},
}

// scriptsRunElsewhere are scripts run on a Redis Cluster by another test.
// A script in neither this list nor a scenario fails the test, so new
// scripts are not forgotten.
var scriptsRunElsewhere = map[string]string{
	"stream/streamtest/ledger.go:credit":            "TestConformance_redisCluster (stream)",
	"internal/pollgate/pollgate.go:takeScript":      "TestGate_oneCopyPollsWhileTheGateIsClosed/redis-cluster (internal/pollgate)",
	"internal/pollgate/pollgate.go:holdScript":      "TestGate_oneCopyPollsWhileTheGateIsClosed/redis-cluster (internal/pollgate)",
	"internal/pollgate/pollgate.go:openScript":      "TestGate_oneCopyPollsWhileTheGateIsClosed/redis-cluster (internal/pollgate)",
	"collector/shared.go:healthScript":              "TestCollector_copiesShareTheSourceHealth/redis-cluster (collector)",
	"collector/shared.go:unflipScript":              "TestCollector_copiesShareTheSourceHealth/redis-cluster (collector)",
	"internal/quota/quota.go:claimScript":           "TestQuota_capsEachOwner/redis-cluster (internal/quota)",
	"flows/comic/holds.go:nextWaveScript":           "TestHold_crashBetweenWavesTellsEachWaveOnce/redis-cluster (flows/comic)",
	"flows/comic/holds.go:extendScript":             "TestHold_relayedHoldStartsAtTheNotifiersSend (flows/comic, on a Redis Cluster)",
	"internal/quota/quota.go:releaseScript":         "TestQuota_capsEachOwner/redis-cluster (internal/quota)",
	"internal/quota/reserve.go:keepScript":          "TestReservation_holdsASlotUntilKeptOrDropped/redis-cluster (internal/quota)",
	"internal/recordstore/recordstore.go:putScript": "TestList_pagesExactly/redis-cluster/hash and /keys (internal/recordstore)",
	"internal/recordstore/tenants.go:deleteScript":  "TestTenants_eachSeesOnlyItsOwnRecords/redis-cluster (internal/recordstore)",
	"stream/accounting.go:trimScript":               "TestConformance_redisCluster/redis-cluster/Trim_keepsUnacknowledged (stream)",
	"stream/consumers.go:renewLease":                "TestConformance_redisCluster/redis-cluster/Consumer_heldByAnotherStopsReadingUntilFree (stream)",
	"stream/deadletter.go:deadLetterScript":         "TestConformance_redisCluster/redis-cluster/DeadLetter_afterMaxDeliveries (stream)",
	"stream/delay.go:parkScript":                    "TestConformance_redisCluster/redis-cluster/DelayedRetry_doesNotBlockThePartition (stream)",
	"stream/inflight.go:refreshScript":              "TestConformance_redisCluster/redis-cluster/SlowBatch_notHandledTwice (stream)",
}

// scriptsOnlyInTests are scripts no production code runs (only their
// package's own tests), with why; no scenario can reach them. The test
// fails when one runs on the cluster after all, so the entry goes.
var scriptsOnlyInTests = map[string]string{}

// TestCluster_scenariosRunEveryScript finds every Lua script of the module
// (redis.NewScript, script.New and stream.NewEffect in non-test files), runs the
// cluster scenarios on a private 3-master Redis Cluster with every command
// logged (SLOWLOG with a threshold of 0) and every script loaded on every
// node (so a script run through redis.Script.Run is an EVALSHA naming it;
// one sent by EVAL, as in a pipeline, is known by its source as SLOWLOG
// shows it), and checks that each script
// ran there. Redis Cluster refuses a script whose keys are not all in one
// slot served by the node (CROSSSLOT, "non local key"), so a scenario that
// passes proves its scripts keep to one slot. The availability scenario is
// the availability end-to-end test, with its exact counts, on the cluster.
func TestCluster_scenariosRunEveryScript(t *testing.T) {
	scripts := findScripts(t, "..")
	cl := testenv.StartRedisCluster(t, testenv.RedisClusterConfig{})
	ctx := context.Background()
	for i := range cl.Len() {
		c := redis.NewClient(&redis.Options{Addr: cl.Node(i).Addr()})
		for _, kv := range [][2]string{{"slowlog-log-slower-than", "0"}, {"slowlog-max-len", "1000000"}} {
			if err := c.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
				t.Fatalf("CONFIG SET %s: %v", kv[0], err)
			}
		}
		for _, s := range scripts {
			if s.src != "" {
				if err := c.ScriptLoad(ctx, s.src).Err(); err != nil {
					t.Fatalf("SCRIPT LOAD %s: %v", s.where, err)
				}
			}
		}
		c.Close()
	}
	for _, sc := range clusterScenarios {
		if !t.Run(sc.name, func(t *testing.T) { sc.run(t, cl.URL()) }) {
			t.FailNow()
		}
	}
	ran := map[string]bool{}
	evals := map[string]bool{} // sources run by EVAL, as SLOWLOG shows them
	for i := range cl.Len() {
		c := redis.NewClient(&redis.Options{Addr: cl.Node(i).Addr()})
		entries, err := c.SlowLogGet(ctx, -1).Result()
		c.Close()
		if err != nil {
			t.Fatalf("SLOWLOG GET: %v", err)
		}
		for _, e := range entries {
			if len(e.Args) < 2 {
				continue
			}
			switch strings.ToUpper(e.Args[0]) {
			case "EVALSHA", "EVALSHA_RO":
				ran[strings.ToLower(e.Args[1])] = true
			case "EVAL", "EVAL_RO":
				evals[e.Args[1]] = true
			}
		}
	}
	for _, s := range scripts {
		if s.src != "" && evals[slowlogArg(s.src)] {
			ran[s.sha] = true
		}
	}
	covered := 0
	for _, s := range scripts {
		switch {
		case ran[s.sha]:
			covered++
			if scriptsOnlyInTests[s.where] != "" {
				t.Errorf("script %s ran on the cluster: remove it from scriptsOnlyInTests", s.where)
			}
		case scriptsRunElsewhere[s.where] != "", scriptsOnlyInTests[s.where] != "":
		default:
			t.Errorf("script %s never ran on the cluster: add a scenario to clusterScenarios (e2e/cluster_scripts_test.go) that runs it", s.where)
		}
	}
	found := map[string]bool{}
	for _, s := range scripts {
		found[s.where] = true
	}
	for _, m := range []map[string]string{scriptsRunElsewhere, scriptsOnlyInTests} {
		for where := range m {
			if !found[where] {
				t.Errorf("script %s is listed in e2e/cluster_scripts_test.go but no longer exists: remove it", where)
			}
		}
	}
	t.Logf("%d of %d scripts ran on the cluster, %d on a cluster in other tests, %d only in unit tests", covered, len(scripts),
		len(scriptsRunElsewhere), len(scriptsOnlyInTests))
}

// slowlogArg is an argument as SLOWLOG GET shows it: Redis keeps the
// first 128 bytes of a longer one and notes how many it left out. Two
// scripts are told apart by it unless they share those bytes and their
// length.
func slowlogArg(s string) string {
	const keep = 128
	if len(s) <= keep {
		return s
	}
	return fmt.Sprintf("%s... (%d more bytes)", s[:keep], len(s)-keep)
}

// ledgerEffects applies a ledger-guarded effect (stream.NewEffect) on the
// cluster for keys of every partition, twice each: once applied, once
// refused.
func ledgerEffects(t *testing.T, nodes string) {
	rdb := dial(t, nodes)
	ctx := context.Background()
	topic := stream.NewTopic("e2eledger", "events", 8)
	l, err := stream.NewLedger(rdb, stream.LedgerConfig{Name: "e2e", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	add := stream.NewEffect(`return redis.call('INCRBY', KEYS[1], ARGV[1])`)
	for p := range topic.Partitions {
		tag := topic.HashTag(p)
		for i, want := range []bool{true, false} {
			applied, _, err := l.Apply(ctx, add, l.Key(tag, "k"), []string{"ds:" + tag + ":sum"}, 5)
			if err != nil || applied != want {
				t.Fatalf("partition %d, apply #%d: %v, %v; want %v", p, i, applied, err, want)
			}
		}
		if n, err := rdb.Get(ctx, "ds:"+tag+":sum").Int(); err != nil || n != 5 {
			t.Errorf("partition %d: sum %d, %v; want 5", p, n, err)
		}
	}
}

// sampleFlow runs the sample flow's stages on the cluster and counts every
// generated tick exactly once through its ledger effect.
func sampleFlow(t *testing.T, nodes string) {
	const partitions, ticks = 8, 600
	rdb := dial(t, nodes)
	ctx := context.Background()
	pub := stream.NewPublisher(rdb, stream.Telemetry{})
	sf, err := sample.New(ctx, flow.Deps{Redis: rdb, Publisher: pub, Settings: flow.Settings{Partitions: partitions}})
	if err != nil {
		t.Fatal(err)
	}
	stages := sf.Describe().Stages
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	for _, s := range stages {
		s.Config.Block = 100 * time.Millisecond
		r, err := stream.NewRunner(rdb, s, stream.Telemetry{})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = r.Run(runCtx) })
	}
	if n, err := sampletest.Generate(ctx, pub, partitions, 5000, 6, ticks, nil); err != nil || n != ticks {
		t.Fatalf("generate: %d, %v; want %d", n, err, ticks)
	}
	var total int64
	testenv.WaitFor(t, 30*time.Second, func() bool {
		counts, err := sampletest.Counts(ctx, rdb, partitions)
		if err != nil {
			return false
		}
		total = 0
		for _, n := range counts {
			total += n
		}
		return total >= ticks
	}, "sample readings counted")
	if total != ticks {
		t.Errorf("%d readings counted, %d ticks generated", total, ticks)
	}
}

// script is one Lua script of the module.
type script struct {
	where string // dir/file.go:variable
	sha   string // SHA1 of its source, as EVALSHA names it
	src   string // its source; "" for effects, whose wrapper is the stream package's
}

// findScripts returns every redis.NewScript, script.New and stream.NewEffect call of
// the non-test Go files under root with its source's SHA1. The source must
// be a constant string expression: literals, package-level constants and
// variables of literals, //go:embed files, and + of those.
func findScripts(t *testing.T, root string) []script {
	t.Helper()
	var out []script
	dirs := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dirs[filepath.Dir(path)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir := range dirs {
		out = append(out, packageScripts(t, root, dir)...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].where < out[j].where })
	if len(out) == 0 {
		t.Fatal("no script found: is the module root right?")
	}
	return out
}

// packageScripts returns the scripts of the package in dir.
func packageScripts(t *testing.T, root, dir string) []script {
	t.Helper()
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		files[name] = f
	}
	ev := &constEval{dir: dir, decls: map[string]ast.Expr{}, embeds: map[string]string{}}
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || (g.Tok != token.CONST && g.Tok != token.VAR) {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						ev.decls[n.Name] = vs.Values[i]
					}
					if file := embedFile(g.Doc, vs.Doc); file != "" {
						ev.embeds[n.Name] = file
					}
				}
			}
		}
	}
	rel, _ := filepath.Rel(root, dir)
	var out []script
	for name, f := range files {
		var owner string // the package-level variable or function being read
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				owner = n.Name.Name
			case *ast.ValueSpec:
				owner = n.Names[0].Name
			case *ast.AssignStmt:
				if id, ok := n.Lhs[0].(*ast.Ident); ok && len(n.Lhs) == 1 {
					owner = id.Name
				}
			case *ast.CallExpr:
				kind := scriptCall(n)
				if kind == "" || len(n.Args) != 1 {
					return true
				}
				where := filepath.ToSlash(filepath.Join(rel, name)) + ":" + owner
				if kind == "effect-wrapper" {
					return true // stream.NewEffect's own NewScript: each effect is found at its call
				}
				src, err := ev.eval(n.Args[0])
				if err != nil {
					t.Errorf("script %s: source is not a constant string expression (%v); make it one so this test can find it", where, err)
					return true
				}
				sha := sha1.Sum([]byte(src))
				s := script{where: where, sha: hex.EncodeToString(sha[:]), src: src}
				if kind == "effect" {
					s.sha, s.src = stream.NewEffect(src).Hash(), ""
				}
				out = append(out, s)
			}
			return true
		})
	}
	return out
}

// scriptCall tells what a call makes: "script" (redis.NewScript or
// script.New, the internal/script package's EVALSHA wrapper), "effect"
// (stream.NewEffect or NewEffect inside package stream), "effect-wrapper"
// (the NewScript inside stream.NewEffect), or "".
func scriptCall(c *ast.CallExpr) string {
	switch fn := c.Fun.(type) {
	case *ast.SelectorExpr:
		x, ok := fn.X.(*ast.Ident)
		switch {
		case ok && x.Name == "redis" && fn.Sel.Name == "NewScript":
			if id, ok := c.Args[0].(*ast.Ident); ok && id.Name == "src" {
				return "effect-wrapper"
			}
			return "script"
		case ok && x.Name == "script" && fn.Sel.Name == "New":
			return "script"
		case ok && x.Name == "stream" && fn.Sel.Name == "NewEffect":
			return "effect"
		}
	case *ast.Ident:
		if fn.Name == "NewEffect" {
			return "effect"
		}
	}
	return ""
}

// embedFile returns the file of a //go:embed directive in the comments.
func embedFile(groups ...*ast.CommentGroup) string {
	for _, g := range groups {
		if g == nil {
			continue
		}
		for _, c := range g.List {
			if f, ok := strings.CutPrefix(c.Text, "//go:embed "); ok {
				return strings.TrimSpace(f)
			}
		}
	}
	return ""
}

// constEval evaluates constant string expressions of one package.
type constEval struct {
	dir    string
	decls  map[string]ast.Expr
	embeds map[string]string
	depth  int
}

func (e *constEval) eval(x ast.Expr) (string, error) {
	e.depth++
	defer func() { e.depth-- }()
	if e.depth > 50 {
		return "", fmt.Errorf("too deep")
	}
	switch x := x.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", fmt.Errorf("literal %s is not a string", x.Value)
		}
		return strconv.Unquote(x.Value)
	case *ast.ParenExpr:
		return e.eval(x.X)
	case *ast.BinaryExpr:
		if x.Op != token.ADD {
			return "", fmt.Errorf("operator %s", x.Op)
		}
		a, err := e.eval(x.X)
		if err != nil {
			return "", err
		}
		b, err := e.eval(x.Y)
		return a + b, err
	case *ast.Ident:
		if f, ok := e.embeds[x.Name]; ok {
			b, err := os.ReadFile(filepath.Join(e.dir, f))
			return string(b), err
		}
		if d, ok := e.decls[x.Name]; ok {
			return e.eval(d)
		}
		return "", fmt.Errorf("%s is not a package-level constant", x.Name)
	}
	return "", fmt.Errorf("expression %T", x)
}
