//go:build unix

// Package filelock serialises read-modify-write updates of files shared by
// several hermes processes of one profile, with flock(2) on a lock file
// beside them. Readers need no lock: writers replace files atomically.
package filelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// retry is how often Lock tries again while another process holds the lock.
const retry = 5 * time.Millisecond

// Lock takes the exclusive lock on path (creating the file if needed) and
// returns the function that releases it. It waits while another process
// holds the lock, until ctx is done. The kernel drops the lock if the
// holder dies, so a crashed writer never wedges the profile.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing the file drops the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
		case <-time.After(retry):
		}
	}
}
