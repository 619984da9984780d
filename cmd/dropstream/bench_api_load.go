package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/dropstream/dropstream/internal/benchstat"
)

// runLoadTarget is the hidden `bench load` (benchstat.LoadArgs): the load
// process of the benches.
func runLoadTarget(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	var l benchstat.Load
	if err := json.NewDecoder(io.LimitReader(stdin, 64<<20)).Decode(&l); err != nil {
		return fmt.Errorf("bench load: stdin: %w", err)
	}
	if err := l.Validate(); err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(l.Run(ctx))
}

// loadProcess runs l in a load process.
func loadProcess(ctx context.Context, l benchstat.Load) (benchstat.LoadResult, error) {
	return l.RunApart(ctx, selfCommand(benchstat.LoadArgs...))
}

// selfCommand runs this binary with args: a bench's helper process. Tests
// point it at the test binary.
var selfCommand = func(args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return exec.Command(exe, args...)
}
