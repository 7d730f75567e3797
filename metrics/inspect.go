package metrics

import (
	"context"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/queuedetail"
	"github.com/prometheus/client_golang/prometheus"
)

// InspectTimeout bounds the listing of one scrape of NewInspector's
// collector.
const InspectTimeout = 10 * time.Second

// NewInspector returns a collector that lists the objects of in at every
// scrape (as baton ls does), for a process that watches a backend rather
// than uses it (baton serve):
//
//	baton_object_holders{backend,primitive,name}          current holders
//	baton_object_waiters{backend,primitive,name}          waiters, where the backend counts them
//	baton_object_held_seconds{backend,primitive,name}     how long the oldest holder has held it, where known
//	baton_object_lease_seconds{backend,primitive,name}    the least lease time left of a holder
//	baton_object_last_token_high{backend,primitive,name}  the last fencing token / 2^32
//	baton_object_last_token_low{backend,primitive,name}   the last fencing token mod 2^32
//	baton_object_queue_jobs{backend,primitive,name,state} a queue's jobs; state: ready, delayed, in_flight, dead
//	baton_object_queue_oldest_ready_seconds{backend,primitive,name}
//	                                                      how long a queue's oldest ready job has waited, where known
//	baton_inspect_up                                      1 if the last listing succeeded, else 0
//	baton_inspect_errors_total                            listings that failed
//
// A listing that fails still answers the scrape: up reads 0 and the error
// counter counts it, so that an alert can tell a backend that is down from
// one without objects. Tokens are 64-bit and go past 2^53 (same-host
// reader/writer tokens start near 1.8e18), where a float64 sample could no
// longer tell consecutive tokens apart; each half of the token is exact in
// a sample, changes() of the low half counts the grants between scrapes,
// and high*4294967296+low is the token. A label holding the token would be
// exact too, but would start a new series at every grant.
//
// The options are New's; names past the limit are summed (holders,
// waiters, jobs) or reduced (oldest hold, least lease, highest token,
// oldest ready job) under OtherName.
func NewInspector(in baton.Inspector, opts ...Option) prometheus.Collector {
	c := New(opts...)
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(c.cfg.namespace, "object", name), help,
			[]string{"backend", "primitive", "name"}, c.cfg.constant)
	}
	return &inspectCollector{c: c, in: in,
		holders:   d("holders", "Current holders of the object."),
		waiters:   d("waiters", "Waiters of the object, where the backend counts them."),
		held:      d("held_seconds", "How long the oldest current holder has held the object, where the backend knows it."),
		lease:     d("lease_seconds", "The least lease time a current holder has left."),
		tokenHigh: d("last_token_high", "The last fencing token given out for the object, divided by 2^32."),
		tokenLow:  d("last_token_low", "The last fencing token given out for the object, modulo 2^32."),
		jobs: prometheus.NewDesc(prometheus.BuildFQName(c.cfg.namespace, "object", "queue_jobs"), "Jobs of a queue by state.",
			[]string{"backend", "primitive", "name", "state"}, c.cfg.constant),
		oldest: d("queue_oldest_ready_seconds", "How long the oldest ready job of a queue has waited, where the backend knows it."),
		up: prometheus.NewDesc(prometheus.BuildFQName(c.cfg.namespace, "inspect", "up"),
			"1 if the last listing of the backend succeeded, 0 if it failed.", nil, c.cfg.constant),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: c.cfg.namespace, Subsystem: "inspect",
			Name: "errors_total", Help: "Listings of the backend that failed.", ConstLabels: c.cfg.constant}),
	}
}

type inspectCollector struct {
	c                             *Collector // for its options and name labels
	in                            baton.Inspector
	holders, waiters, held, lease *prometheus.Desc
	tokenHigh, tokenLow, up       *prometheus.Desc
	jobs, oldest                  *prometheus.Desc
	errors                        prometheus.Counter
}

func (ic *inspectCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{ic.holders, ic.waiters, ic.held, ic.lease, ic.tokenHigh, ic.tokenLow, ic.up, ic.jobs, ic.oldest} {
		ch <- d
	}
	ic.errors.Describe(ch)
}

type objectStats struct {
	holders, waiters float64
	counted          bool // waiters known for some object
	held, lease      time.Duration
	heldKnown        bool // the start of some hold is known
	token            baton.Token
	queue            bool       // a queue's counts were read
	jobs             [4]float64 // ready, delayed, in flight, dead
	oldest           time.Duration
}

func (ic *inspectCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), InspectTimeout)
	defer cancel()
	infos, err := ic.in.List(ctx)
	up := 1.0
	if err != nil {
		up = 0
		ic.errors.Inc()
	}
	ch <- prometheus.MustNewConstMetric(ic.up, prometheus.GaugeValue, up)
	ic.errors.Collect(ch)
	now := time.Now()
	stats := map[seriesKey]*objectStats{}
	var order []seriesKey
	for _, in := range infos {
		k := seriesKey{in.Backend, in.Kind, ic.c.label(in.Name)}
		s := stats[k]
		if s == nil {
			s = &objectStats{lease: -1}
			stats[k] = s
			order = append(order, k)
		}
		s.holders += float64(len(in.Holders))
		if in.Waiters >= 0 {
			s.waiters += float64(in.Waiters)
			s.counted = true
		}
		s.token = max(s.token, in.LastToken)
		if c, ok := queuedetail.Parse(in); ok {
			s.queue = true
			for i, n := range []int{c.Ready, c.Delayed, c.InFlight, c.Dead} {
				s.jobs[i] += float64(n)
			}
			s.oldest = max(s.oldest, c.Oldest)
		}
		for _, h := range in.Holders {
			if !h.Since.IsZero() {
				s.held = max(s.held, now.Sub(h.Since))
				s.heldKnown = true
			}
			if h.TTL > 0 && (s.lease < 0 || h.TTL < s.lease) {
				s.lease = h.TTL
			}
		}
	}
	for _, k := range order {
		s := stats[k]
		lv := []string{k.backend, string(k.kind), k.name}
		ch <- prometheus.MustNewConstMetric(ic.holders, prometheus.GaugeValue, s.holders, lv...)
		if s.counted {
			ch <- prometheus.MustNewConstMetric(ic.waiters, prometheus.GaugeValue, s.waiters, lv...)
		}
		if s.heldKnown {
			ch <- prometheus.MustNewConstMetric(ic.held, prometheus.GaugeValue, s.held.Seconds(), lv...)
		}
		if s.lease >= 0 {
			ch <- prometheus.MustNewConstMetric(ic.lease, prometheus.GaugeValue, s.lease.Seconds(), lv...)
		}
		ch <- prometheus.MustNewConstMetric(ic.tokenHigh, prometheus.GaugeValue, float64(uint64(s.token)>>32), lv...)
		ch <- prometheus.MustNewConstMetric(ic.tokenLow, prometheus.GaugeValue, float64(uint64(s.token)&0xffffffff), lv...)
		if s.queue {
			for i, state := range []string{"ready", "delayed", "in_flight", "dead"} {
				ch <- prometheus.MustNewConstMetric(ic.jobs, prometheus.GaugeValue, s.jobs[i], append(lv, state)...)
			}
			if s.oldest > 0 {
				ch <- prometheus.MustNewConstMetric(ic.oldest, prometheus.GaugeValue, s.oldest.Seconds(), lv...)
			}
		}
	}
}
