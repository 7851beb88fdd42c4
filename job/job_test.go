package job_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/job/jobtest"
)

// ownerJSON is o as encoding/json writes it.
func ownerJSON(t *testing.T, o job.Owner, escapeHTML bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(o); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(buf.Bytes())
}

// appended is AppendFields's output as a whole object.
func appended(o job.Owner, escapeHTML bool) []byte {
	b := o.AppendFields([]byte{'{'}, escapeHTML, false)
	return append(append(b[:1], b[2:]...), '}')
}

// TestOwnerFieldsAreAllListed: every text field of Owner is in the list
// the hand-written JSON reads and writes, under its JSON name.
func TestOwnerFieldsAreAllListed(t *testing.T) {
	o := jobtest.Owner("listed")
	v := reflect.ValueOf(&o).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Type.Kind() != reflect.String {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		p, ok := o.TextField(name)
		if !ok || p != v.Field(i).Addr().Interface().(*string) {
			t.Errorf("Owner.%s (%s) is not in its text fields", f.Name, name)
		}
	}
	for _, html := range []bool{false, true} {
		if got, want := appended(o, html), ownerJSON(t, o, html); !bytes.Equal(got, want) {
			t.Errorf("AppendFields:\n%s\nencoding/json:\n%s", got, want)
		}
		if got, want := appended(job.Owner{}, html), ownerJSON(t, job.Owner{}, html); !bytes.Equal(got, want) {
			t.Errorf("AppendFields of none:\n%s\nencoding/json:\n%s", got, want)
		}
	}
}

// TestMapTextSparesTheOwnerSession: redaction reaches every label but
// the owner session, which scopes reads.
func TestMapTextSparesTheOwnerSession(t *testing.T) {
	o := jobtest.Owner("mapped")
	session := o.ParentSessionID
	o.MapText(strings.ToUpper)
	if o.ParentSessionID != session {
		t.Errorf("owner session mapped to %q", o.ParentSessionID)
	}
	if o.TaskID != strings.ToUpper(jobtest.Owner("mapped").TaskID) || o.SessionKey == jobtest.Owner("mapped").SessionKey {
		t.Errorf("labels not mapped: %+v", o)
	}
}

// FuzzOwnerAppendFields compares AppendFields with encoding/json on any
// text.
func FuzzOwnerAppendFields(f *testing.F) {
	f.Add("t", "o", "agent:main", "sess", true)
	f.Add("<&>\u2028\xff", "", "\x00\x1f\"\\", "é", false)
	f.Fuzz(func(t *testing.T, task, ownerTask, key, session string, notify bool) {
		o := job.Owner{TaskID: task, OwnerTaskID: ownerTask, SessionKey: key, ParentSessionID: session, NotifyOnComplete: notify}
		for _, html := range []bool{false, true} {
			if got, want := appended(o, html), ownerJSON(t, o, html); !bytes.Equal(got, want) {
				t.Fatalf("AppendFields(html %v):\n%q\nencoding/json:\n%q", html, got, want)
			}
		}
	})
}
