// Package metrics exports what the core of baton observes as Prometheus
// metrics: a Collector is a baton.Observer and a prometheus.Collector.
//
//	c := metrics.New()
//	prometheus.MustRegister(c)
//	baton.Observe(backend, c)
//	http.Handle("/metrics", promhttp.Handler())
//
// Every series is labelled by backend (the backend's kind: "local",
// "redis", ...), primitive ("mutex", "rwmutex", "semaphore", "cond",
// "queue") and
// name. Names come from the program, and may be unbounded (a lock per job
// id): by default the first DefaultMaxNames distinct names have a series of
// their own and every later one is counted under the name "other"; see
// WithMaxNames and WithNameLabel.
//
// The metrics, with the default namespace "baton":
//
//	baton_acquisitions_total{backend,primitive,name,result}   result: granted, failed
//	baton_wait_seconds{backend,primitive,name}                histogram: wait of every acquisition
//	baton_hold_seconds{backend,primitive,name}                histogram: hold time of lock releases
//	baton_waiters{backend,primitive,name}                     acquisitions in progress
//	baton_releases_total{backend,primitive,name}
//	baton_losses_total{backend,primitive,name}                holds lost (counted when the loss fires)
//	baton_handoffs_total{backend,primitive,name}              holds passed between handles of a Backend
//	baton_errors_total{backend,primitive,name,op,class}       class: baton.ErrorClass
//	baton_queue_jobs_total{backend,name,result}               result: acked, retried, dead
//
// A Queue's claims count as acquisitions (wait_seconds is the claim
// wait) and their Ack, Retry or Fail as releases; NewQueueCollector
// exports the depth of queues.
//
// Only programs that import this package link client_golang.
package metrics

import (
	"sync"

	"github.com/batonlock/baton"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxNames is how many distinct names get series of their own by
// default.
const DefaultMaxNames = 100

// OtherName is the name label of the names past the limit.
const OtherName = "other"

// Option configures New.
type Option func(*config)

type config struct {
	namespace string
	maxNames  int
	label     func(string) string
	buckets   []float64
	constant  prometheus.Labels
}

// WithNamespace sets the metrics' namespace (default "baton").
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithMaxNames sets how many distinct names get series of their own (in
// the order they are first seen); later ones are labelled OtherName.
// n <= 0 labels every name OtherName.
func WithMaxNames(n int) Option { return func(c *config) { c.maxNames = n } }

// WithNameLabel labels each name with f(name) instead (for instance a
// prefix: "jobs/1234" to "jobs"). f must return few distinct values; no
// limit is applied to them.
func WithNameLabel(f func(name string) string) Option { return func(c *config) { c.label = f } }

// WithBuckets sets the buckets, in seconds, of the wait and hold
// histograms (default prometheus.ExponentialBuckets(1e-6, 4, 14): 1 µs to
// about 67 s).
func WithBuckets(b []float64) Option { return func(c *config) { c.buckets = b } }

// WithConstLabels adds labels with fixed values to every series (a
// service, an instance).
func WithConstLabels(l prometheus.Labels) Option { return func(c *config) { c.constant = l } }

// Collector counts the events of the Backends it observes.
type Collector struct {
	cfg config

	acquisitions *prometheus.CounterVec
	wait, hold   *prometheus.HistogramVec
	waiters      *prometheus.GaugeVec
	releases     *prometheus.CounterVec
	losses       *prometheus.CounterVec
	handoffs     *prometheus.CounterVec
	errors       *prometheus.CounterVec
	queueJobs    *prometheus.CounterVec // queue.go

	series sync.Map // seriesKey -> *series

	mu    sync.Mutex
	names map[string]struct{} // names with series of their own; guarded by mu
	known sync.Map            // the same, read without mu
}

type seriesKey struct {
	backend string
	kind    baton.Kind
	name    string // the label
}

// series are the children of one label set, looked up once.
type series struct {
	granted, failed            prometheus.Counter
	wait, hold                 prometheus.Observer
	waiters                    prometheus.Gauge
	releases, losses, handoffs prometheus.Counter
}

// New returns a Collector; register it, and attach it with baton.Observe.
func New(opts ...Option) *Collector {
	cfg := config{namespace: "baton", maxNames: DefaultMaxNames, buckets: prometheus.ExponentialBuckets(1e-6, 4, 14)}
	for _, o := range opts {
		o(&cfg)
	}
	labels := []string{"backend", "primitive", "name"}
	counter := func(name, help string, extra ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: cfg.namespace, Name: name, Help: help, ConstLabels: cfg.constant},
			append(labels[:3:3], extra...))
	}
	histogram := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: cfg.namespace, Name: name, Help: help,
			Buckets: cfg.buckets, ConstLabels: cfg.constant}, labels)
	}
	return &Collector{
		cfg:          cfg,
		acquisitions: counter("acquisitions_total", "Acquisitions that ended, by result (granted, failed).", "result"),
		wait:         histogram("wait_seconds", "Time from the start of an acquisition to its end."),
		hold:         histogram("hold_seconds", "Time a lock was held, at its release."),
		waiters: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: cfg.namespace, Name: "waiters",
			Help: "Acquisitions in progress.", ConstLabels: cfg.constant}, labels),
		releases: counter("releases_total", "Successful releases."),
		losses:   counter("losses_total", "Holds lost, counted when the loss fires."),
		handoffs: counter("handoffs_total", "Holds passed to another handle of the same Backend."),
		errors:   counter("errors_total", "Failed calls, by operation and error class.", "op", "class"),
		names:    make(map[string]struct{}),
		queueJobs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: cfg.namespace, Name: "queue_jobs_total",
			Help: "Claims of queue jobs ended, by result (acked, retried, dead).", ConstLabels: cfg.constant},
			[]string{"backend", "name", "result"}),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.collectors() {
		m.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.collectors() {
		m.Collect(ch)
	}
}

func (c *Collector) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.acquisitions, c.wait, c.hold, c.waiters, c.releases, c.losses, c.handoffs, c.errors, c.queueJobs}
}

// label returns the name label of name.
func (c *Collector) label(name string) string {
	if c.cfg.label != nil {
		return c.cfg.label(name)
	}
	if _, ok := c.known.Load(name); ok {
		return name
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.names[name]; ok {
		return name
	}
	if len(c.names) >= c.cfg.maxNames {
		return OtherName
	}
	c.names[name] = struct{}{}
	c.known.Store(name, struct{}{})
	return name
}

func (c *Collector) seriesOf(e *baton.Event) (*series, string) {
	name := c.label(e.Name)
	k := seriesKey{e.Backend, e.Kind, name}
	if s, ok := c.series.Load(k); ok {
		return s.(*series), name
	}
	lv := []string{e.Backend, string(e.Kind), name}
	s := &series{
		granted:  c.acquisitions.WithLabelValues(append(lv[:3:3], "granted")...),
		failed:   c.acquisitions.WithLabelValues(append(lv[:3:3], "failed")...),
		wait:     c.wait.WithLabelValues(lv...),
		hold:     c.hold.WithLabelValues(lv...),
		waiters:  c.waiters.WithLabelValues(lv...),
		releases: c.releases.WithLabelValues(lv...),
		losses:   c.losses.WithLabelValues(lv...),
		handoffs: c.handoffs.WithLabelValues(lv...),
	}
	v, _ := c.series.LoadOrStore(k, s)
	return v.(*series), name
}

// Observe implements baton.Observer.
func (c *Collector) Observe(e baton.Event) {
	if e.Kind == "" {
		// An error of the Backend itself.
		if e.Type == baton.EventError {
			c.errors.WithLabelValues(e.Backend, "", "", e.Op, baton.ErrorClass(e.Err)).Inc()
		}
		return
	}
	s, name := c.seriesOf(&e)
	switch e.Type {
	case baton.EventAcquire:
		s.waiters.Inc()
	case baton.EventAcquired:
		s.waiters.Dec()
		s.granted.Inc()
		s.wait.Observe(e.Wait.Seconds())
	case baton.EventFailed:
		s.waiters.Dec()
		s.failed.Inc()
		s.wait.Observe(e.Wait.Seconds())
	case baton.EventReleased:
		s.releases.Inc()
		if e.Kind == baton.KindQueue {
			c.queueJob(&e, name)
		}
		if e.Held > 0 {
			s.hold.Observe(e.Held.Seconds())
		}
	case baton.EventLost:
		s.losses.Inc()
	case baton.EventPassed:
		s.handoffs.Inc()
	case baton.EventError:
		c.errors.WithLabelValues(e.Backend, string(e.Kind), name, e.Op, baton.ErrorClass(e.Err)).Inc()
	}
}

var (
	_ baton.Observer       = (*Collector)(nil)
	_ prometheus.Collector = (*Collector)(nil)
)
