package filepool

import (
	"errors"
	"fmt"
	"os"
)

// Draft is an idle file being written for a path it does not have yet,
// whose first contents are synced while the caller does other work: a
// supervisor writes a job's state before it starts the job, and the sync
// runs beside the fork and exec instead of after them. Later contents
// (Rewrite) are not synced: a crash may leave any of the versions written,
// the first one at least.
type Draft struct {
	p      *Pool
	name   string
	f      *os.File
	synced chan error
}

// Draft takes an idle file, writes data to it and starts syncing it. It
// returns nil when none is idle, or the one taken could not be written
// (it is removed): the caller makes the file itself.
func (p *Pool) Draft(data []byte) *Draft {
	for {
		name := p.take()
		if name == "" {
			return nil
		}
		f, _, err := openRegular(name)
		if err == nil {
			if err = overwrite(f, data); err == nil {
				d := &Draft{p: p, name: name, f: f, synced: make(chan error, 1)}
				go func() { d.synced <- f.Sync() }()
				return d
			}
			f.Close()
		}
		_ = os.Remove(name)
	}
}

// Rewrite makes the draft hold data instead, unsynced.
func (d *Draft) Rewrite(data []byte) error { return overwrite(d.f, data) }

// Place waits for the first contents to be synced and renames the draft
// to path, which must not exist (the error then wraps fs.ErrExist). The
// draft is done with either way: a draft not placed goes back to the pool.
func (d *Draft) Place(path string) error {
	if err := d.finish(); err != nil {
		d.discard()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := renameNoReplace(d.name, path); err != nil {
		if errors.Is(err, errNoReplaceUnsupported) {
			d.p.Close()
		}
		d.discard()
		return err
	}
	return nil
}

// Discard gives the draft back to the pool unplaced, emptied. A nil
// draft (none was taken) has nothing to give back.
func (d *Draft) Discard() {
	if d == nil {
		return
	}
	_ = d.finish()
	d.discard()
}

// finish waits for the first sync and closes the file: the error is the
// sync's, or the close's.
func (d *Draft) finish() error {
	err := <-d.synced
	if cerr := d.f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (d *Draft) discard() {
	empty(d.name)
	d.p.put(d.name)
}
