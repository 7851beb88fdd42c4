package admission

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hermesrun/hermes/internal/atomicfile"
	"github.com/hermesrun/hermes/internal/safefile"
)

// Journal file suffixes: a job waiting in the queue, and one that left it
// and holds a slot until its end is recorded.
const (
	journalQueued  = ".queued"
	journalStarted = ".started"
	// journalHeld is a job held outside the queue (Hold).
	journalHeld = ".held"
)

// maxJournalBytes bounds one journal file: a start request with its
// environment, well under this; a bigger file is not ours.
const maxJournalBytes = 4 << 20

// DamagedRetention is how long the set-aside copy of a damaged ledger is
// kept for whoever wants to look at it. The copy holds no job's request
// (those may carry secrets in their environment): only ids, owners and
// times.
const DamagedRetention = 7 * 24 * time.Hour

func (l *FileLedger) journalDir() string { return filepath.Join(l.dir, "jobs") }

func (l *FileLedger) journalPath(id, suffix string) string {
	return filepath.Join(l.journalDir(), id+suffix)
}

// journal records e, a job just queued (or held: suffix), in a file of
// its own.
func (l *FileLedger) journal(e Entry, suffix string) error {
	if err := os.MkdirAll(l.journalDir(), 0o700); err != nil {
		return fmt.Errorf("admission journal: %w", err)
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(l.journalPath(e.ID, suffix), b, 0o600); err != nil {
		return fmt.Errorf("admission journal: %w", err)
	}
	return nil
}

// journalStarted marks the journal of id as having left the queue. A job
// queued before the journal existed has none, which is no error.
func (l *FileLedger) journalStarted(id string) error {
	err := os.Rename(l.journalPath(id, journalQueued), l.journalPath(id, journalStarted))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("admission journal: %w", err)
	}
	return nil
}

// unjournal removes what the journal holds of id in the queue.
func (l *FileLedger) unjournal(id string) {
	_ = os.Remove(l.journalPath(id, journalQueued))
	_ = os.Remove(l.journalPath(id, journalStarted))
}

// recover rebuilds the state of a ledger file that no longer decodes: the
// entries that still read, those of the journal it no longer names, and,
// for entries cut in the middle, their ids and owners without their
// requests. The damaged file is set aside scrubbed of requests; older
// copies are removed. Called under the lock.
func (l *FileLedger) recover() (*fileState, error) {
	b, err := os.ReadFile(l.path())
	if err != nil {
		return nil, fmt.Errorf("admission ledger: %w", err)
	}
	st, partial := salvage(b)
	known := func(id string) bool {
		_, running := st.Running[id]
		_, held := st.Held[id]
		return running || held || slices.ContainsFunc(st.Queue, func(e Entry) bool { return e.ID == id })
	}
	back := l.fromJournal(st, partial, known)
	// Cut entries the journal did not have: their ids and owners are all
	// that is left, and their dispatcher records them lost.
	for id, e := range partial {
		if !known(id) {
			back = append(back, e)
		}
	}
	st.Queue = append(st.Queue, back...)
	slices.SortStableFunc(st.Queue, rebuiltOrder)
	l.setAside(b)
	return st, nil
}

// fromJournal brings back into st the jobs the journal has and the
// ledger lost (known says which it has): those that left the queue as
// running, held ones as held. It returns the queued ones, for the caller
// to queue, and drops from partial what it found.
//
// The journal holds every job queued since the journal began, until its
// slot is released: what the ledger lost comes back from it.
func (l *FileLedger) fromJournal(st *fileState, partial map[string]Entry, known func(id string) bool) []Entry {
	var back []Entry
	names, _ := os.ReadDir(l.journalDir())
	for _, n := range names {
		id, suffix := journalName(n.Name())
		if suffix == "" || !validID(id) || known(id) {
			continue
		}
		e, err := readJournal(l.journalPath(id, suffix), id)
		if err != nil {
			e = Entry{ID: id, Owner: partial[id].Owner} // its request is lost
		}
		delete(partial, id)
		if suffix == journalStarted {
			// It left the queue: its slot is held until whoever looks
			// finds its end, or records it lost (it never started).
			st.Running[id] = e
			continue
		}
		if suffix == journalHeld && err == nil {
			if st.Held == nil {
				st.Held = map[string]Entry{}
			}
			st.Held[id] = e
			continue
		}
		back = append(back, e)
	}
	return back
}

// rebuiltOrder orders a rebuilt queue: in queue order, entries that lost
// their enqueue time last.
func rebuiltOrder(a, b Entry) int {
	switch {
	case a.EnqueuedAt.IsZero() != b.EnqueuedAt.IsZero():
		if a.EnqueuedAt.IsZero() {
			return 1
		}
		return -1
	}
	return cmp.Compare(queueOrder(a), queueOrder(b))
}

// journalName splits a journal file's name into its job id and suffix;
// the suffix is empty for a file that is not a journal's.
func journalName(name string) (id, suffix string) {
	for _, sfx := range []string{journalQueued, journalStarted, journalHeld} {
		if id, ok := strings.CutSuffix(name, sfx); ok {
			return id, sfx
		}
	}
	return "", ""
}

// readJournal reads the journal file of id.
func readJournal(path, id string) (Entry, error) {
	b, err := safefile.ReadRegular(path, maxJournalBytes)
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return Entry{}, err
	}
	if e.ID != id {
		return Entry{}, fmt.Errorf("journal of %s names %.64q", id, e.ID)
	}
	return e, nil
}

// setAside keeps a copy of the damaged ledger b, its requests scrubbed,
// and removes copies older than DamagedRetention.
func (l *FileLedger) setAside(b []byte) {
	old, _ := filepath.Glob(l.path() + ".damaged-*")
	for _, p := range old {
		if fi, err := os.Lstat(p); err == nil && time.Since(fi.ModTime()) > DamagedRetention {
			_ = os.Remove(p)
		}
	}
	aside := fmt.Sprintf("%s.damaged-%d", l.path(), time.Now().UnixNano())
	_ = atomicfile.Write(aside, scrub(b), 0o600)
	_ = os.Remove(l.path())
}

// payloadValue matches a payload's value, whole or cut at the end of the
// file.
var payloadValue = regexp.MustCompile(`("payload"\s*:\s*)"[^"]*("|$)`)

// scrub blanks the requests in a ledger file, whole or damaged.
func scrub(b []byte) []byte {
	return payloadValue.ReplaceAll(b, []byte(`${1}"(scrubbed)"$2`))
}

// idPattern is a process id (job.IsID), without importing receipts.
var idPattern = regexp.MustCompile(`^proc_[0-9a-f]{12}$`)

func validID(id string) bool { return idPattern.MatchString(id) }

// partialEntry finds the id, and the owner when it follows, of an entry
// cut in the middle.
var partialEntry = regexp.MustCompile(`"id"\s*:\s*"(proc_[0-9a-f]{12})"(?:\s*,\s*"owner"\s*:\s*"((?:[^"\\]|\\.)*)")?`)

// salvage decodes what it can of a damaged ledger file: the bucket, every
// whole entry of running and queue, in order, up to the damage. It also
// returns, by id, the entries it found cut (or beyond the damage) with
// what of them reads: id and owner.
func salvage(b []byte) (*fileState, map[string]Entry) {
	st := &fileState{Running: map[string]Entry{}}
	partial := map[string]Entry{}
	dec := json.NewDecoder(bytes.NewReader(b))
	stop := walkObject(dec, func(key string) bool {
		switch key {
		case "tokens":
			return dec.Decode(&st.Tokens) == nil
		case "at":
			return dec.Decode(&st.At) == nil
		case "running":
			return walkEntries(dec, func(id string, e Entry) { st.Running[id] = e })
		case "held":
			return walkEntries(dec, func(id string, e Entry) {
				if st.Held == nil {
					st.Held = map[string]Entry{}
				}
				st.Held[id] = e
			})
		case "queue":
			return walkArray(dec, func() bool {
				var e Entry
				if err := dec.Decode(&e); err != nil || !validID(e.ID) {
					return false
				}
				st.Queue = append(st.Queue, e)
				return true
			}) == nil
		default:
			var skip json.RawMessage
			return dec.Decode(&skip) == nil
		}
	})
	if stop != nil {
		// The rest, from where decoding stopped: ids of entries cut.
		partial = cutEntries(b[min(int(dec.InputOffset()), len(b)):])
	}
	if st.Tokens < 0 {
		st.Tokens = 0
	}
	return st, partial
}

// walkEntries reads an object of entries by id from dec, giving each to
// add; an entry that does not decode, or does not carry its valid id,
// stops it. It reports whether the whole object decoded.
func walkEntries(dec *json.Decoder, add func(id string, e Entry)) bool {
	return walkObject(dec, func(id string) bool {
		var e Entry
		if err := dec.Decode(&e); err != nil || e.ID != id || !validID(id) {
			return false
		}
		add(id, e)
		return true
	}) == nil
}

// cutEntries finds, by id, the entries in rest, the part of a ledger file
// beyond the damage, with what of them reads: id and owner.
func cutEntries(rest []byte) map[string]Entry {
	partial := map[string]Entry{}
	for _, m := range partialEntry.FindAllSubmatch(rest, -1) {
		id := string(m[1])
		var owner string
		if len(m[2]) > 0 {
			_ = json.Unmarshal(append(append([]byte{'"'}, m[2]...), '"'), &owner)
		}
		partial[id] = Entry{ID: id, Owner: owner}
	}
	return partial
}

var errStop = errors.New("salvage stopped")

// walkObject reads an object from dec, calling member for each key with
// the decoder before its value; member says whether the value decoded.
func walkObject(dec *json.Decoder, member func(key string) bool) error {
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errStop
	}
	for dec.More() {
		t, err := dec.Token()
		key, ok := t.(string)
		if err != nil || !ok || !member(key) {
			return errStop
		}
	}
	if _, err := dec.Token(); err != nil {
		return errStop
	}
	return nil
}

// walkArray reads an array from dec, calling elem before each element.
func walkArray(dec *json.Decoder, elem func() bool) error {
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return errStop
	}
	for dec.More() {
		if !elem() {
			return errStop
		}
	}
	if _, err := dec.Token(); err != nil {
		return errStop
	}
	return nil
}
