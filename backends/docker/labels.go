package docker

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/runner/receipts"
)

// labels is what a container carries so that a stranger can write its
// receipt: the searchable fields one label each, and the whole Meta as JSON
// so that nothing is lost when Meta grows.
func (b *Backend) labels(spec backend.Spec, image string) (map[string]string, error) {
	meta, err := json.Marshal(spec.Meta)
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
	set(LabelSession, spec.Meta.ParentSessionID)
	set(LabelTask, spec.Meta.TaskID)
	set(LabelTraceID, spec.Meta.TraceID)
	set(LabelSpanID, spec.Meta.SpanID)
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
// creation time, the fallback start time when Meta lacks one.
func liveFromLabels(l map[string]string, created time.Time) backend.Live {
	live := backend.Live{
		ID:      l[LabelID],
		Command: l[LabelCommand],
		Backend: Name,
		Cwd:     l[LabelCwd],
		Image:   l[LabelImage],
	}
	if d, err := time.ParseDuration(l[LabelTimeout]); err == nil {
		live.Timeout = d
	}
	if err := json.Unmarshal([]byte(l[LabelMeta]), &live.Meta); err != nil {
		// A container labelled by hand or by an older hermes: keep what
		// the single labels say.
		live.Meta = backend.Meta{
			Owner: receipts.Owner{ParentSessionID: l[LabelSession], TaskID: l[LabelTask]},
			Trace: receipts.Trace{TraceID: l[LabelTraceID], SpanID: l[LabelSpanID]},
		}
	}
	if live.Meta.Profile == "" {
		live.Meta.Profile = l[LabelProfile]
	}
	if live.Meta.StartedAt.IsZero() {
		live.Meta.StartedAt = created
	}
	return live
}
