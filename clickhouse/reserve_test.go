package clickhouse

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
)

func stringColumn(tb testing.TB) column.Interface {
	tb.Helper()
	col, err := column.Type("String").Column("s", nil)
	if err != nil {
		tb.Fatal(err)
	}
	return col
}

func TestReserveStrings_encodesTheSameColumn(t *testing.T) {
	for _, n := range []int{0, 1, minReserve - 1, minReserve, 5 * minReserve} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			vals := make([]string, n)
			for i := range vals {
				vals[i] = fmt.Sprintf("%.*s%d", i%9, "entity-", i%100) // lengths vary, some repeat
			}
			var encoded [2][]byte
			for k, reserve := range []bool{false, true} {
				col := stringColumn(t)
				if reserve {
					reserveStrings(col, vals)
					if col.Rows() != 0 {
						t.Fatalf("reserved column holds %d rows, want 0", col.Rows())
					}
				}
				if _, err := col.Append(vals); err != nil {
					t.Fatal(err)
				}
				var b proto.Buffer
				col.Encode(&b)
				encoded[k] = b.Buf
			}
			if !bytes.Equal(encoded[0], encoded[1]) {
				t.Errorf("reserved column encodes %d bytes, unreserved %d: not the same", len(encoded[1]), len(encoded[0]))
			}
		})
	}
}

// BenchmarkReserveStrings measures filling a String column of 100,000
// values with and without reserving its bytes first.
func BenchmarkReserveStrings(b *testing.B) {
	vals := make([]string, 100_000)
	for i := range vals {
		vals[i] = fmt.Sprintf("sim:venue-%d:2026-12-01:19:00:%d", i%1000, i)
	}
	for _, reserve := range []bool{false, true} {
		b.Run(fmt.Sprintf("reserve=%v", reserve), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				col := stringColumn(b)
				if reserve {
					reserveStrings(col, vals)
				}
				if _, err := col.Append(vals); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
