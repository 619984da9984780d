package stream

import (
	"fmt"
	"strings"
	"testing"
)

func TestTopic_validate(t *testing.T) {
	long := strings.Repeat("a", 64)
	tests := []struct {
		name  string
		topic Topic
		want  []string // substrings the error must contain; none: valid
	}{
		{"simple", NewTopic("avail", "raw", 8), nil},
		{"one partition", NewTopic("a", "b", 1), nil},
		{"max partitions", NewTopic("a", "b", MaxPartitions), nil},
		{"all allowed characters", NewTopic("az09_-", "-_90za", 3), nil},
		{"64 characters", NewTopic(long, long, 2), nil},
		{"empty flow", NewTopic("", "raw", 1), []string{"topic flow"}},
		{"empty name", NewTopic("avail", "", 1), []string{"topic name"}},
		{"65 character flow", NewTopic(long+"a", "raw", 1), []string{"topic flow"}},
		{"65 character name", NewTopic("avail", long+"a", 1), []string{"topic name"}},
		{"upper case flow", NewTopic("Avail", "raw", 1), []string{"topic flow"}},
		{"dot in flow breaks the hash tag", NewTopic("a.b", "raw", 1), []string{"topic flow"}},
		{"brace in flow", NewTopic("a}", "raw", 1), []string{"topic flow"}},
		{"colon in name", NewTopic("avail", "raw:x", 1), []string{"topic name"}},
		{"space in name", NewTopic("avail", "r w", 1), []string{"topic name"}},
		{"non-ASCII name", NewTopic("avail", "rä", 1), []string{"topic name"}},
		{"zero partitions", NewTopic("avail", "raw", 0), []string{"partitions 0"}},
		{"negative partitions", NewTopic("avail", "raw", -1), []string{"partitions -1"}},
		{"too many partitions", NewTopic("avail", "raw", MaxPartitions+1), []string{"partitions 1025"}},
		{"every field bad", Topic{Flow: "A", Name: "", Partitions: 0},
			[]string{"topic flow", "topic name", "partitions 0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.topic.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error naming %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
			if got := strings.Count(err.Error(), "\n") + 1; got != len(tc.want) {
				t.Errorf("Validate() reported %d problems, want %d: %q", got, len(tc.want), err)
			}
		})
	}
}

func TestTopic_keyShapes(t *testing.T) {
	tests := []struct {
		topic                  Topic
		p                      int
		tag, stream, dlq, name string
	}{
		{NewTopic("avail", "raw", 8), 0, "{avail.0}", "ds:{avail.0}:raw", "ds:{avail.0}:raw:dlq", "avail.raw"},
		{NewTopic("avail", "raw", 8), 7, "{avail.7}", "ds:{avail.7}:raw", "ds:{avail.7}:raw:dlq", "avail.raw"},
		{NewTopic("f-1", "n_2", 1024), 1023, "{f-1.1023}", "ds:{f-1.1023}:n_2", "ds:{f-1.1023}:n_2:dlq", "f-1.n_2"},
	}
	for _, tc := range tests {
		t.Run(tc.stream, func(t *testing.T) {
			if got := tc.topic.HashTag(tc.p); got != tc.tag {
				t.Errorf("HashTag(%d) = %q, want %q", tc.p, got, tc.tag)
			}
			if got := tc.topic.Stream(tc.p); got != tc.stream {
				t.Errorf("Stream(%d) = %q, want %q", tc.p, got, tc.stream)
			}
			if got := tc.topic.DeadLetterStream(tc.p); got != tc.dlq {
				t.Errorf("DeadLetterStream(%d) = %q, want %q", tc.p, got, tc.dlq)
			}
			if got := tc.topic.String(); got != tc.name {
				t.Errorf("String() = %q, want %q", got, tc.name)
			}
			// Redis Cluster hashes the part between the first "{" and the
			// next "}": stream and dead-letter stream must hash by the tag.
			for _, key := range []string{tc.topic.Stream(tc.p), tc.topic.DeadLetterStream(tc.p)} {
				if got := unitClusterHashTag(key); "{"+got+"}" != tc.tag {
					t.Errorf("cluster hash tag of %q = %q, want %q", key, got, tc.tag)
				}
			}
		})
	}
}

// unitClusterHashTag returns the part of key Redis Cluster hashes.
func unitClusterHashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[i+1 : i+1+j]
}

func TestTopic_partitionDeterministicAndInRange(t *testing.T) {
	keys := []string{"", "a", "b", "order-1", "order-2", "ÄÖÜ", strings.Repeat("x", 1000), "\x00"}
	for _, parts := range []int{1, 2, 3, 7, 8, 64, MaxPartitions} {
		topic := NewTopic("f", "n", parts)
		for _, k := range keys {
			p := topic.Partition(k)
			if p < 0 || p >= parts {
				t.Errorf("partitions=%d: Partition(%q) = %d, out of range", parts, k, p)
			}
			for range 3 {
				if again := topic.Partition(k); again != p {
					t.Errorf("partitions=%d: Partition(%q) = %d then %d", parts, k, p, again)
				}
			}
			// A copy of the topic (another process) agrees.
			if other := NewTopic("f", "n", parts).Partition(k); other != p {
				t.Errorf("partitions=%d: equal topics disagree on %q: %d vs %d", parts, k, p, other)
			}
		}
	}
	// Out-of-range partition counts never yield an invalid index.
	for _, parts := range []int{0, -1} {
		if p := NewTopic("f", "n", parts).Partition("k"); p != 0 {
			t.Errorf("partitions=%d: Partition = %d, want 0", parts, p)
		}
	}
}

func TestTopic_partitionSpreadsKeys(t *testing.T) {
	tests := []struct {
		parts int
		keyf  string
	}{
		{8, "key-%d"},
		{8, "order:%08d"},
		{3, "key-%d"},
		{16, "user-%d@example.com"},
	}
	const n = 10000
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d/%s", tc.parts, tc.keyf), func(t *testing.T) {
			topic := NewTopic("f", "n", tc.parts)
			counts := make([]int, tc.parts)
			for i := range n {
				counts[topic.Partition(fmt.Sprintf(tc.keyf, i))]++
			}
			fair := float64(n) / float64(tc.parts)
			for p, c := range counts {
				if float64(c) < 0.8*fair || float64(c) > 1.2*fair {
					t.Errorf("partition %d got %d of %d keys, want %.0f ± 20%% (all: %v)", p, c, n, fair, counts)
				}
			}
		})
	}
}
