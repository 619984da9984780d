package respconn

import (
	"errors"
	"strings"
	"testing"
)

// replies are valid RESP2 and RESP3 values, each followed by nothing.
var replies = []string{
	"+OK\r\n",
	"-ERR unknown command\r\n",
	":42\r\n",
	"$-1\r\n",
	"*-1\r\n",
	"_\r\n",
	"$0\r\n\r\n",
	"$5\r\nhe\nlo\r\n",
	"*0\r\n",
	"*2\r\n$3\r\nfoo\r\n:1\r\n",
	"*1\r\n*2\r\n$4\r\ns\r\n0\r\n*2\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$3\r\nkey\r\n$1\r\nk\r\n*2\r\n$3\r\n1-2\r\n*-1\r\n",
	"%1\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*0\r\n",
	"!11\r\nERR bad one\r\n",
	"~2\r\n#t\r\n,1.5\r\n",
}

// TestScanner_findsTheEndHoweverTheBytesArrive feeds each reply, followed
// by a second one, in pieces split at every byte, and checks that the end
// of the first is found exactly once all its bytes are in.
func TestScanner_findsTheEndHoweverTheBytesArrive(t *testing.T) {
	for _, r := range replies {
		stream := r + "+NEXT\r\n"
		for cut := 0; cut <= len(stream); cut++ {
			var s scanner
			end, err := s.value([]byte(stream[:cut]))
			if err != nil {
				t.Fatalf("%q cut at %d: %v", r, cut, err)
			}
			if end < 0 {
				end, err = s.value([]byte(stream))
			}
			if err != nil || end != len(r) {
				t.Fatalf("%q cut at %d: end %d, %v; want %d", r, cut, end, err, len(r))
			}
		}
		// Byte by byte, resuming each time.
		var s scanner
		end := -1
		for n := 1; n <= len(stream) && end < 0; n++ {
			var err error
			if end, err = s.value([]byte(stream[:n])); err != nil {
				t.Fatalf("%q at %d bytes: %v", r, n, err)
			}
			if end >= 0 && n != len(r) {
				t.Fatalf("%q: complete at %d bytes, want %d", r, n, len(r))
			}
		}
		if end != len(r) {
			t.Fatalf("%q: end %d, want %d", r, end, len(r))
		}
	}
}

func TestScanner_rejectsWhatIsNotRESP(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"unknown type", "?what\r\n"},
		{"no CR", "+OK\n"},
		{"empty line", "\r\n"},
		{"bad bulk length", "$x\r\nab\r\n"},
		{"negative bulk length", "$-2\r\n"},
		{"bulk without CRLF", "$2\r\nabcd\r\n"},
		{"bad count", "*1x\r\n"},
		{"too deep", strings.Repeat("*1\r\n", maxDepth+1) + ":1\r\n"},
		{"endless line", "+" + strings.Repeat("a", maxLine+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s scanner
			if _, err := s.value([]byte(tc.in)); !errors.Is(err, ErrProtocol) {
				t.Fatalf("value(%.40q) = %v, want ErrProtocol", tc.in, err)
			}
		})
	}
}

func TestReplyError_readsErrorRepliesOnly(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"-NOSCRIPT No matching script\r\n", "NOSCRIPT No matching script"},
		{"!9\r\nERR blob!\r\n", "ERR blob!"},
		{"+OK\r\n", ""},
		{":1\r\n", ""},
		{"$3\r\n-no\r\n", ""},
	} {
		err := ReplyError([]byte(tc.in))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("ReplyError(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
