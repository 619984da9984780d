package stream

// Read size. A read asks for at most BatchSize entries, and fewer when
// they are large: as many as fit in ReadBytes, judged by the mean size of
// the entries the partition read last.
//
// This bounds a read's memory and keeps replies short enough for Redis to
// send in one turn of its event loop (about 64 KB a client); a longer reply
// waits behind the other partitions' reads. Measured: 500 entries of 370
// bytes (three turns) read 10 % slower than 350 (two turns).

// firstEntryBytes is the entry size assumed before a partition's first
// read: a read of unknown entries asks for ReadBytes/256 of them (512 at
// the default, above the default BatchSize).
const firstEntryBytes = 256

// readSize is what a partition learned of its entries' size.
type readSize struct {
	entryBytes int // mean reply bytes per entry of the last non-empty read; 0 before it
}

// count is how many entries the next read asks for.
func (s *readSize) count(cfg RunnerConfig) int {
	per := s.entryBytes
	if per <= 0 {
		per = firstEntryBytes
	}
	return max(1, min(cfg.BatchSize, cfg.ReadBytes/per))
}

// took records a read that asked for asked entries and returned msgs in a
// reply of size bytes. It updates the mean entry size and, when the read
// returned all it asked for, marks that more are likely waiting (see
// Message.MoreWaiting).
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
