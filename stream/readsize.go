package stream

import "cmp"

// Read sizing. A read asks for at most BatchSize entries, and at most as
// many as fit in ReadBytes at the mean size of the partition's last
// entries. This bounds a read's memory and keeps a reply within one of
// Redis's ~64 KB writes (BENCHMARKS.md, "Reads sized by bytes").

// firstEntryBytes is the entry size assumed before a partition's first read.
const firstEntryBytes = 256

// readSize is what a partition learned of its entries' size.
type readSize struct {
	entryBytes int // mean reply bytes per entry of the last non-empty read; 0 before it
}

// count is how many entries the next read asks for.
func (s *readSize) count(cfg RunnerConfig) int {
	return max(1, min(cfg.BatchSize, cfg.ReadBytes/cmp.Or(s.entryBytes, firstEntryBytes)))
}

// took records a read of asked entries that returned msgs in size bytes,
// and marks msgs as likely followed by more (Message.MoreWaiting) when the
// read was full.
func (s *readSize) took(size int, msgs []*Message, asked int) {
	if n := len(msgs); n > 0 && size > 0 {
		s.entryBytes = max(1, size/n)
	}
	if len(msgs) < asked {
		return
	}
	for _, m := range msgs {
		m.full = true
	}
}
