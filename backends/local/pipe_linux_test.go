package local

import (
	"context"
	"io"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
)

func pipeSize(t *testing.T, d *deadlineEOF) int {
	t.Helper()
	rc, err := d.f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	size := -1
	if err := rc.Control(func(fd uintptr) { size, _ = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0) }); err != nil {
		t.Fatal(err)
	}
	return size
}

// TestPipeGrowsForAStream: a job that streams gets the large pipe and its
// reads are paced; one that prints a little keeps the kernel's default and
// is read as it prints, so quiet jobs never spend the per-user pipe budget.
func TestPipeGrowsForAStream(t *testing.T) {
	cases := []struct {
		name, command string
		want          int
	}{
		{"quiet", "echo hello; sleep 0.2", defaultPipe},
		{"stream", "head -c 16777216 /dev/zero; sleep 0.2", bigPipe},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, err := New().Start(context.Background(), backend.Spec{Job: job.Job{ID: backend.NewID(), Command: tc.command}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = h.Kill(context.Background(), 0) })
			d := h.Output().(*deadlineEOF)
			// Read like the pump does at its largest, and look while the
			// job still holds the pipe open (it sleeps after writing).
			buf := make([]byte, 256<<10)
			var total int
			paced := false
			for total < 16<<20 && tc.want == bigPipe {
				n, err := d.Read(buf)
				total += n
				paced = paced || d.pace.pacing
				if err == io.EOF {
					t.Fatalf("stream ended after %d bytes", total)
				}
			}
			if tc.want == defaultPipe {
				if _, err := d.Read(buf); err != nil {
					t.Fatal(err)
				}
			}
			if got := pipeSize(t, d); got != tc.want {
				t.Fatalf("pipe size %d, want %d", got, tc.want)
			}
			if got, want := paced || d.pace.pacing, tc.want == bigPipe; got != want {
				t.Fatalf("paced %v, want %v", got, want)
			}
			if _, err := h.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}
