package api_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/hermesrun/hermes/api"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/job/jobtest"
)

// TestStartRequestCarriesTheJob: what a client asks for of a job comes
// back whole on the runner's side of the wire, every askable field set;
// what the runner allocates (id, trace, start, profile, owner session,
// attempts) is never taken from the body.
func TestStartRequestCarriesTheJob(t *testing.T) {
	asked := jobtest.Full("api")
	b, err := json.Marshal(api.NewStartRequest(asked, []string{"A=1"}))
	if err != nil {
		t.Fatal(err)
	}
	var body api.StartRequest
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	want := asked
	want.ID, want.Trace, want.StartedAt, want.Profile, want.ParentSessionID, want.Attempts = "", job.Trace{}, time.Time{}, "", "", nil
	if got := body.Job(asked.Backend, asked.Cwd); !reflect.DeepEqual(got, want) || !reflect.DeepEqual(body.Env, []string{"A=1"}) {
		t.Errorf("the runner reads\n%+v\nwant\n%+v", got, want)
	}
}
