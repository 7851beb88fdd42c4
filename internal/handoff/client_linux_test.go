package handoff

import (
	"syscall"
	"testing"
	"time"
)

// TestReadReplyEndsAtAWholeReply: the caller takes the supervisor's last
// reply as soon as it is whole, with the connection still open (the
// supervisor closes it in its own time); a reply cut short by the close is
// read up to the close.
func TestReadReplyEndsAtAWholeReply(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		close  bool
		want   string
		code   int
	}{
		{"exit line, connection open", []string{"x0\n"}, false, "x0\n", 0},
		{"exit line in two writes", []string{"x1", "2\n"}, false, "x12\n", 12},
		{"broken pipe, connection open", []string{"p1"}, false, "p1", 141},
		{"supervisor gone first", nil, true, "", 1},
		{"exit line cut by the close", []string{"x4"}, true, "x4", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { syscall.Close(fds[0]); syscall.Close(fds[1]) })
			got := make(chan []byte, 1)
			go func() { got <- readReply(fds[0]) }()
			for _, w := range tt.writes {
				if _, err := syscall.Write(fds[1], []byte(w)); err != nil {
					t.Fatal(err)
				}
			}
			if tt.close {
				syscall.Shutdown(fds[1], syscall.SHUT_WR)
			}
			select {
			case reply := <-got:
				if string(reply) != tt.want {
					t.Fatalf("reply %q; want %q", reply, tt.want)
				}
				if tt.want != "p1" { // result would kill this test with SIGPIPE
					if code := result(reply); code != tt.code {
						t.Errorf("exit status %d; want %d", code, tt.code)
					}
				}
			case <-time.After(10 * time.Second):
				t.Fatal("readReply still waits with a whole reply read (or after the close)")
			}
		})
	}
}
