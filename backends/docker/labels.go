package docker

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
)

// labels is what a container carries so that a stranger can write its
// receipt: the searchable fields one label each, and the whole job.Job as
// JSON so that nothing is lost when the job grows.
func (b *Backend) labels(spec backend.Spec, image string) (map[string]string, error) {
	meta, err := json.Marshal(spec.Job)
	if err != nil {
		return nil, fmt.Errorf("encode meta: %w", err)
	}
	l := map[string]string{
		LabelID:      spec.ID,
		LabelProfile: b.opts.Profile,
		LabelCommand: spec.Command,
		LabelImage:   image,
		LabelMeta:    string(meta),
	}
	set := func(k, v string) {
		if v != "" {
			l[k] = v
		}
	}
	set(LabelSession, spec.ParentSessionID)
	set(LabelTask, spec.TaskID)
	set(LabelTraceID, spec.TraceID)
	set(LabelSpanID, spec.SpanID)
	set(LabelCwd, spec.Cwd)
	if spec.Timeout > 0 {
		l[LabelTimeout] = spec.Timeout.String()
	}
	if spec.Stdin {
		l[LabelStdin] = "true"
	}
	return l, nil
}

// liveFromLabels rebuilds what Start was told. created is the container's
// creation time, the fallback start time when the job label lacks one.
func liveFromLabels(l map[string]string, created time.Time) backend.Live {
	var live backend.Live
	if err := json.Unmarshal([]byte(l[LabelMeta]), &live.Job); err != nil {
		// A container labelled by hand: keep what the single labels say.
		live.Job = job.Job{
			Owner: job.Owner{ParentSessionID: l[LabelSession], TaskID: l[LabelTask]},
			Trace: job.Trace{TraceID: l[LabelTraceID], SpanID: l[LabelSpanID]},
		}
	}
	// The single labels name what runs; an older hermes's whole-job
	// label lacked them.
	live.ID, live.Command, live.Backend, live.Cwd, live.Image = l[LabelID], l[LabelCommand], Name, l[LabelCwd], l[LabelImage]
	if d, err := time.ParseDuration(l[LabelTimeout]); err == nil {
		live.Timeout = d
	}
	if live.Profile == "" {
		live.Profile = l[LabelProfile]
	}
	if live.StartedAt.IsZero() {
		live.StartedAt = created
	}
	return live
}
