package testenv

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Freeze stops process p with SIGSTOP, as a VM pause or a throttled
// container would, and waits until the kernel reports it stopped. SIGCONT
// resumes it.
func Freeze(t testing.TB, p *os.Process) {
	t.Helper()
	_ = p.Signal(syscall.SIGSTOP)
	WaitFor(t, 5*time.Second, func() bool {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/stat")
		// The state follows the parenthesized command name.
		i := bytes.LastIndexByte(stat, ')')
		return err == nil && i > 0 && i+2 < len(stat) && stat[i+2] == 'T'
	}, "process %d stopped", p.Pid)
}
