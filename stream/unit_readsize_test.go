package stream

import "testing"

func TestReadSize_count(t *testing.T) {
	cfg := RunnerConfig{BatchSize: 500, ReadBytes: 128 << 10}
	tests := []struct {
		name       string
		reads      [][2]int // (reply bytes, entries) of the reads before
		batch, max int
		want       int
	}{
		{name: "first read assumes 256-byte entries", batch: 1000, want: 512},
		{name: "first read within the batch size", want: 500},
		{name: "small entries: the batch size", reads: [][2]int{{500 * 200, 500}}, want: 500},
		{name: "370-byte entries: what fits", reads: [][2]int{{185_000, 500}}, want: 354},
		{name: "the last read counts", reads: [][2]int{{185_000, 500}, {2_000_000, 10}}, want: 1},
		{name: "entries larger than the bound: one", reads: [][2]int{{1 << 20, 1}}, want: 1},
		{name: "an empty read teaches nothing", reads: [][2]int{{185_000, 500}, {10, 0}}, want: 354},
		{name: "a tight bound", max: 1 << 10, reads: [][2]int{{300, 1}}, want: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg
			if tt.batch > 0 {
				c.BatchSize = tt.batch
			}
			if tt.max > 0 {
				c.ReadBytes = tt.max
			}
			var s readSize
			for _, r := range tt.reads {
				s.took(r[0], unitMessages(r[1]), c.BatchSize)
			}
			if got := s.count(c); got != tt.want {
				t.Errorf("count = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestReadSize_tookMarksOnlyAFullRead(t *testing.T) {
	for _, tt := range []struct {
		got, asked int
		want       bool
	}{{3, 3, true}, {2, 3, false}, {0, 3, false}} {
		msgs := unitMessages(tt.got)
		var s readSize
		s.took(100*tt.got, msgs, tt.asked)
		for _, m := range msgs {
			if m.MoreWaiting() != tt.want {
				t.Errorf("%d of %d asked: MoreWaiting %v, want %v", tt.got, tt.asked, m.MoreWaiting(), tt.want)
			}
		}
	}
}

// unitMessages returns n empty messages.
func unitMessages(n int) []*Message {
	msgs := make([]*Message, n)
	for i := range msgs {
		msgs[i] = &Message{}
	}
	return msgs
}
