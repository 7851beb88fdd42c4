package kubernetes

import (
	"reflect"
	"testing"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job/jobtest"
)

// TestPodCarriesTheJob: a pod's labels and annotations give back the
// whole job it was started as, every field set (a field added to job.Job
// reaches whoever records the pod's end), and never its environment.
func TestPodCarriesTheJob(t *testing.T) {
	b := offline(t, Options{})
	spec := backend.Spec{Job: jobtest.Full("pod"), Env: []string{"SECRET=1"}}
	p, err := b.podFor(spec, "busybox:1")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range p.Annotations {
		if v == "SECRET=1" {
			t.Errorf("annotation %s carries the environment", k)
		}
	}
	want := spec.Job
	want.Backend, want.Image = "kubernetes", "busybox:1"
	if got := liveFromPod(p); !reflect.DeepEqual(got.Job, want) {
		t.Errorf("pod gave back\n%+v\nwant\n%+v", got.Job, want)
	}
}
