package promtext

import (
	"bufio"
	"sync"
)

// GaugeVec is a gauge per label value tuple.
type GaugeVec struct{ v *vec[Gauge] }

// NewGaugeVec registers a gauge family with the given label names.
func (r *Registry) NewGaugeVec(name, help string, labels ...string) *GaugeVec {
	gv := &GaugeVec{v: newVec(name, help, "gauge", labels, func() *Gauge { return &Gauge{} })}
	r.add(name, gv)
	return gv
}

// With returns the gauge of these label values (in the family's order).
func (gv *GaugeVec) With(values ...string) *Gauge { return gv.v.with(values) }

func (gv *GaugeVec) write(w *bufio.Writer) {
	gv.v.header(w)
	gv.v.each(func(vals []string, g *Gauge) {
		sample(w, gv.v.name, gv.v.labels, vals, "", "", g.v.get())
	})
}

// BoundedLabel keeps a label's value set bounded, for values that come
// from outside (tenant names): the first Max distinct values are kept as
// they are, later ones all become Other. A scrape's size then never grows
// with the number of callers.
type BoundedLabel struct {
	max  int
	mu   sync.Mutex
	seen map[string]bool
}

// Other is the value every value past the bound shares.
const Other = "other"

// NewBoundedLabel keeps up to max distinct values.
func NewBoundedLabel(max int) *BoundedLabel {
	return &BoundedLabel{max: max, seen: map[string]bool{}}
}

// Value is the label value to use for v.
func (b *BoundedLabel) Value(v string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen[v] {
		return v
	}
	if len(b.seen) >= b.max {
		return Other
	}
	b.seen[v] = true
	return v
}
