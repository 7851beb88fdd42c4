// Package promtext keeps counters, gauges and histograms and writes them in
// the Prometheus text exposition format (version 0.0.4).
//
// It replaces the Prometheus client library for the runner's handful of
// instruments: that library registers its default collectors and reads the
// runtime's metric descriptions in init, which every hermes process paid
// (about 1.8 ms of CPU, a `hermes --version` included) because the CLI and
// the runner are one binary. Nothing here runs before it is used.
package promtext

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Registry holds metric families in the order they were created. Each
// server has its own: there is no default registry.
type Registry struct {
	mu       sync.Mutex
	families []writer
	names    map[string]bool
}

type writer interface{ write(w *bufio.Writer) }

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{names: map[string]bool{}} }

func (r *Registry) add(name string, f writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names[name] {
		// Two families of one name are a programming error, found by the
		// first test that builds the registry.
		panic("promtext: metric " + name + " registered twice")
	}
	r.names[name] = true
	r.families = append(r.families, f)
}

// WriteTo writes every family in the text format.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	families := slices.Clone(r.families)
	r.mu.Unlock()
	cw := &countingWriter{w: w}
	bw := bufio.NewWriter(cw)
	for _, f := range families {
		f.write(bw)
	}
	err := bw.Flush()
	return cw.n, err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// ContentType is the media type of the text exposition format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Handler serves the registry for a scraper.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", ContentType)
		_, _ = r.WriteTo(w)
	})
}

// float is a float64 updated atomically.
type float struct{ bits atomic.Uint64 }

func (f *float) add(v float64) {
	for {
		old := f.bits.Load()
		if f.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func (f *float) set(v float64) { f.bits.Store(math.Float64bits(v)) }
func (f *float) get() float64  { return math.Float64frombits(f.bits.Load()) }

// vec keeps one child per label value tuple, in first-use order.
type vec[T any] struct {
	name, help, kind string
	labels           []string
	mu               sync.Mutex
	children         map[string]*T
	keys             []string
	values           map[string][]string
	newChild         func() *T
}

func newVec[T any](name, help, kind string, labels []string, newChild func() *T) *vec[T] {
	return &vec[T]{name: name, help: help, kind: kind, labels: labels,
		children: map[string]*T{}, values: map[string][]string{}, newChild: newChild}
}

func (v *vec[T]) with(values []string) *T {
	if len(values) != len(v.labels) {
		// As with a duplicate name: a call site with the wrong arity is
		// a programming error.
		panic(fmt.Sprintf("promtext: %s takes %d label values, got %d", v.name, len(v.labels), len(values)))
	}
	key := strings.Join(values, "\xff")
	v.mu.Lock()
	defer v.mu.Unlock()
	c, ok := v.children[key]
	if !ok {
		c = v.newChild()
		v.children[key] = c
		v.keys = append(v.keys, key)
		v.values[key] = slices.Clone(values)
	}
	return c
}

// each calls f for every child with its label pairs, sorted by label
// values so that scrapes are stable.
func (v *vec[T]) each(f func(labels []string, c *T)) {
	v.mu.Lock()
	keys := slices.Clone(v.keys)
	v.mu.Unlock()
	slices.Sort(keys)
	for _, k := range keys {
		v.mu.Lock()
		c, vals := v.children[k], v.values[k]
		v.mu.Unlock()
		f(vals, c)
	}
}

func (v *vec[T]) header(w *bufio.Writer) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", v.name, escapeHelp(v.help), v.name, v.kind)
}

// Counter only goes up.
type Counter struct{ v float }

// Inc adds one.
func (c *Counter) Inc() { c.v.add(1) }

// Add adds d, which must not be negative; a negative d is ignored.
func (c *Counter) Add(d float64) {
	if d > 0 {
		c.v.add(d)
	}
}

// CounterVec is a counter per label value tuple.
type CounterVec struct{ v *vec[Counter] }

// NewCounterVec registers a counter family with the given label names.
func (r *Registry) NewCounterVec(name, help string, labels ...string) *CounterVec {
	cv := &CounterVec{v: newVec(name, help, "counter", labels, func() *Counter { return &Counter{} })}
	r.add(name, cv)
	return cv
}

// With returns the counter of these label values (in the family's order).
func (cv *CounterVec) With(values ...string) *Counter { return cv.v.with(values) }

func (cv *CounterVec) write(w *bufio.Writer) {
	cv.v.header(w)
	cv.v.each(func(vals []string, c *Counter) {
		sample(w, cv.v.name, cv.v.labels, vals, "", "", c.v.get())
	})
}

// Gauge goes up and down.
type Gauge struct {
	name, help string
	v          float
}

// NewGauge registers a gauge without labels.
func (r *Registry) NewGauge(name, help string) *Gauge {
	g := &Gauge{name: name, help: help}
	r.add(name, g)
	return g
}

// Inc adds one.
func (g *Gauge) Inc() { g.v.add(1) }

// Dec subtracts one.
func (g *Gauge) Dec() { g.v.add(-1) }

// Set sets the value.
func (g *Gauge) Set(v float64) { g.v.set(v) }

func (g *Gauge) write(w *bufio.Writer) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n", g.name, escapeHelp(g.help), g.name)
	sample(w, g.name, nil, nil, "", "", g.v.get())
}

// Histogram counts observations into cumulative buckets.
type Histogram struct {
	upper  []float64
	counts []atomic.Uint64 // per bucket, not cumulative; the last is +Inf
	sum    float
	count  atomic.Uint64
}

// Observe records v.
func (h *Histogram) Observe(v float64) {
	i, _ := slices.BinarySearch(h.upper, v) // the first bucket with v <= upper
	h.counts[i].Add(1)
	h.sum.add(v)
	h.count.Add(1)
}

// HistogramVec is a histogram per label value tuple.
type HistogramVec struct{ v *vec[Histogram] }

// NewHistogramVec registers a histogram family; buckets are the upper
// bounds, ascending (+Inf is implied).
func (r *Registry) NewHistogramVec(name, help string, buckets []float64, labels ...string) *HistogramVec {
	upper := slices.Clone(buckets)
	slices.Sort(upper)
	upper = slices.Compact(upper)
	hv := &HistogramVec{v: newVec(name, help, "histogram", labels, func() *Histogram {
		return &Histogram{upper: upper, counts: make([]atomic.Uint64, len(upper)+1)}
	})}
	r.add(name, hv)
	return hv
}

// With returns the histogram of these label values.
func (hv *HistogramVec) With(values ...string) *Histogram { return hv.v.with(values) }

func (hv *HistogramVec) write(w *bufio.Writer) {
	hv.v.header(w)
	name := hv.v.name
	hv.v.each(func(vals []string, h *Histogram) {
		// Read count first: buckets observed meanwhile may then add up to
		// more than count, never to less, and +Inf is written as count.
		count := h.count.Load()
		var cum uint64
		for i, le := range h.upper {
			cum += h.counts[i].Load()
			sample(w, name+"_bucket", hv.v.labels, vals, "le", formatFloat(le), float64(min(cum, count)))
		}
		sample(w, name+"_bucket", hv.v.labels, vals, "le", "+Inf", float64(count))
		sample(w, name+"_sum", hv.v.labels, vals, "", "", h.sum.get())
		sample(w, name+"_count", hv.v.labels, vals, "", "", float64(count))
	})
}

// GaugeFunc is a gauge whose value is read at each scrape.
type GaugeFunc struct {
	name, help, kind string
	f                func() float64
}

// NewGaugeFunc registers a gauge read from f at each scrape.
func (r *Registry) NewGaugeFunc(name, help string, f func() float64) {
	r.add(name, &GaugeFunc{name: name, help: help, kind: "gauge", f: f})
}

// NewCounterFunc registers a counter read from f at each scrape (a total
// kept elsewhere, such as the process's CPU time).
func (r *Registry) NewCounterFunc(name, help string, f func() float64) {
	r.add(name, &GaugeFunc{name: name, help: help, kind: "counter", f: f})
}

// NewInfo registers a gauge of constant value 1 whose labels carry facts
// (build information).
func (r *Registry) NewInfo(name, help string, labels, values []string) {
	cv := r.NewCounterVec(name, help, labels...)
	cv.v.kind = "gauge"
	cv.With(values...).Inc()
}

func (g *GaugeFunc) write(w *bufio.Writer) {
	v := g.f()
	if math.IsNaN(v) {
		return // unknown on this platform: leave the family out
	}
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", g.name, escapeHelp(g.help), g.name, g.kind)
	sample(w, g.name, nil, nil, "", "", v)
}

// sample writes one line: name{labels,extra="value"} v.
func sample(w *bufio.Writer, name string, labels, values []string, extra, extraValue string, v float64) {
	w.WriteString(name)
	if len(labels) > 0 || extra != "" {
		// Label names in lexical order, as the reference client writes
		// them, so that text matches do not depend on declaration order.
		type pair struct{ k, v string }
		pairs := make([]pair, 0, len(labels)+1)
		for i, l := range labels {
			pairs = append(pairs, pair{l, values[i]})
		}
		slices.SortFunc(pairs, func(a, b pair) int { return strings.Compare(a.k, b.k) })
		if extra != "" {
			pairs = append(pairs, pair{extra, extraValue}) // le goes last
		}
		w.WriteByte('{')
		for i, p := range pairs {
			if i > 0 {
				w.WriteByte(',')
			}
			w.WriteString(p.k)
			w.WriteString(`="`)
			w.WriteString(escapeLabel(p.v))
			w.WriteByte('"')
		}
		w.WriteByte('}')
	}
	w.WriteByte(' ')
	w.WriteString(formatFloat(v))
	w.WriteByte('\n')
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }
func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
