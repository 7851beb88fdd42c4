package docker

import (
	"reflect"
	"testing"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job/jobtest"
)

// TestLabelsCarryTheJob: a container's labels give back the whole job it
// was started as, every field set, so a field added to job.Job reaches a
// stranger that records the container's end; a container labelled by hand
// keeps what its single labels say.
func TestLabelsCarryTheJob(t *testing.T) {
	b := &Backend{opts: Options{Profile: "/home/u/.hermes"}}
	spec := backend.Spec{Job: jobtest.Full("labels"), Env: []string{"SECRET=1"}}
	l, err := b.labels(spec, "busybox:1")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range l {
		if v == "SECRET=1" || k == "env" {
			t.Errorf("label %s carries the environment", k)
		}
	}
	want := spec.Job
	want.Backend, want.Image = Name, "busybox:1"
	if got := liveFromLabels(l, jobtest.At); !reflect.DeepEqual(got.Job, want) {
		t.Errorf("labels gave back\n%+v\nwant\n%+v", got.Job, want)
	}

	delete(l, LabelMeta)
	got := liveFromLabels(l, jobtest.At)
	if got.ID != spec.ID || got.ParentSessionID != spec.ParentSessionID || got.TaskID != spec.TaskID ||
		got.TraceID != spec.TraceID || got.StartedAt != jobtest.At || got.Profile != b.opts.Profile {
		t.Errorf("hand-labelled container read as %+v", got.Job)
	}
}
