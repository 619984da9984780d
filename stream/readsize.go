package stream

// Read size. A read of new entries asks for at most BatchSize entries, and
// for fewer when they are large: as many as fit in ReadBytes, judged by the
// mean size (in reply bytes) of the entries the partition read last.
//
// Besides bounding the memory one read takes, this keeps replies short
// enough for Redis to send promptly. Redis writes at most 64 KB or so to a
// client per turn of its event loop (NET_MAX_WRITES_PER_EVENT, rounded up
// to its 16 KB reply blocks) and runs every other ready client's command
// before the next turn; a reply of three turns therefore waits behind two
// rounds of the other partitions' reads. Measured with four partitions on
// one redis-server: 500 entries of 370 bytes (185 KB, three turns) were
// read 10 % slower than 350 (130 KB), while the same count of 290-byte
// entries (146 KB, two turns) was not.

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
// reply of size bytes: what it teaches of the entries' size, and, when it
// returned all it asked for, that more are likely waiting (see
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
