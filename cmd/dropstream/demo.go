package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dropstream/dropstream/flows/sample"
	"github.com/dropstream/dropstream/stream"
)

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	var rate, sensors int
	var every time.Duration
	fs := flagSet("demo", "Runs everything in one process: an embedded Redis (unless DROPSTREAM_REDIS_URL is set),\nthe simulated sources, every stage and the API, with a live status line.", stderr, &cfg, "text")
	envInt(fs, &rate, "rate", "DROPSTREAM_DEMO_RATE", 200, "simulated observations per second")
	envInt(fs, &sensors, "sensors", "DROPSTREAM_DEMO_SENSORS", 50, "simulated sources")
	fs.DurationVar(&every, "status-every", time.Second, "how often the status line is refreshed")
	if err := fs.parse(args); err != nil {
		return err
	}
	if rate < 1 || rate > 1_000_000 || sensors < 1 || sensors > 100_000 || every <= 0 {
		return fmt.Errorf("rate %d (1..1000000), sensors %d (1..100000) or status-every %s out of range", rate, sensors, every)
	}
	a, err := newApp(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer a.close()
	all, err := a.stages()
	if err != nil {
		return err
	}
	stages, _ := pick(all, "all")
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	runners, failed, err := a.runStages(ctx, &wg, stages, 1)
	if err != nil {
		return err
	}
	var published atomic.Int64
	wg.Go(func() {
		_, err := sample.Generate(ctx, a.pub, cfg.Partitions, rate, sensors, 0, published.Store)
		if err != nil {
			a.log.Error("generator stopped", "error", err)
		}
	})
	if cfg.APIAddr != "" {
		srv, err := a.apiServer()
		if err != nil {
			return err
		}
		wg.Go(func() {
			if err := srv.Listen(ctx); err != nil {
				a.log.Error("api stopped", "error", err)
				cancel()
			}
		})
		fmt.Fprintf(stdout, "dropstream demo: API on %s — try /healthz, /readyz, /metrics; Ctrl-C stops\n", cfg.APIAddr)
	}
	wg.Go(func() { a.status(ctx, stdout, &published, runners, every) })
	select {
	case <-ctx.Done():
		return nil
	case err := <-failed:
		return err
	}
}

// status prints a live status line: on a terminal it rewrites one line,
// otherwise it prints a line each period.
func (a *app) status(ctx context.Context, w io.Writer, published *atomic.Int64, runners []*stream.Runner, every time.Duration) {
	tty := isTerminal(w)
	dlq := stream.NewDeadLetters(a.rdb)
	topics, _ := a.topics()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if tty {
				fmt.Fprintln(w)
			}
			return
		case <-t.C:
		}
		var b strings.Builder
		counts, err := sample.Counts(ctx, a.rdb, a.cfg.Partitions)
		var counted int64
		for _, n := range counts {
			counted += n
		}
		fmt.Fprintf(&b, "observations %d", published.Load())
		for _, r := range runners {
			fmt.Fprintf(&b, " | %s lag %s", r.Info().Stage, lagText(r.Lag()))
		}
		var dead int64
		for _, tp := range topics {
			n, _ := dlq.Count(ctx, tp)
			dead += n
		}
		fmt.Fprintf(&b, " | counted %d | dlq %d", counted, dead)
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(&b, " | error %v", err)
		}
		if tty {
			fmt.Fprintf(w, "\r\033[K%s", b.String())
		} else {
			fmt.Fprintln(w, b.String())
		}
	}
}

func lagText(n int64) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprint(n)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
