package osproc_test

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/osproc"
)

// readSyscalls is how many read calls this process has made so far
// (/proc/self/io), or -1 where the kernel does not count them.
func readSyscalls(t *testing.T) int {
	t.Helper()
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "syscr: "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return -1
}

// processCount is how many processes the system has now.
func processCount(t *testing.T) int {
	t.Helper()
	names, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range names {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			n++
		}
	}
	return n
}

// TestDescendantsOnePass: a tree of a thousand processes is walked in one
// pass over /proc, not one pass per descendant (which made a kill of such
// a job take a minute). The reads are counted, not timed: the walk reads
// each process's stat once, plus the directory listing.
func TestDescendantsOnePass(t *testing.T) {
	const width = 1000
	// bash forks width sleepers and one subshell holding a chain of three:
	// children and grandchildren.
	cmd := exec.Command("bash", "-c", `for i in $(seq `+strconv.Itoa(width)+`); do sleep 300 & done; (sleep 300 & (sleep 300 & wait) & wait) & echo ready; wait`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	want := width + 4 // the sleepers, the two subshells and their two sleeps
	var got []int
	for deadline := time.Now().Add(30 * time.Second); ; {
		before := readSyscalls(t)
		procs := processCount(t)
		got = osproc.Descendants(cmd.Process.Pid)
		after := readSyscalls(t)
		if before >= 0 {
			// A directory listing takes a few reads per hundred entries;
			// each stat file one or two.
			if reads, bound := after-before, 3*procs+100; reads > bound {
				t.Fatalf("walking %d descendants took %d reads among %d processes, want at most %d", len(got), reads, procs, bound)
			}
		}
		if len(got) >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the last forks may still be on their way
	}
	if len(got) < want {
		t.Fatalf("Descendants found %d processes, want %d", len(got), want)
	}
}

func TestStatusField(t *testing.T) {
	if n, ok := osproc.StatusField(0, "VmRSS"); !ok || n <= 0 {
		t.Errorf("VmRSS of this process = %d, %v", n, ok)
	}
	if n, ok := osproc.StatusField(os.Getpid(), "Threads"); !ok || n < 1 {
		t.Errorf("Threads of this process = %d, %v", n, ok)
	}
	if _, ok := osproc.StatusField(0, "NoSuchField"); ok {
		t.Error("a field that is not there is reported")
	}
	if _, ok := osproc.StatusField(1<<22+7, "VmRSS"); ok {
		t.Error("a process that is not there is reported")
	}
}
