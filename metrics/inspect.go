package metrics

import (
	"context"
	"time"

	"github.com/batonlock/baton"
	"github.com/prometheus/client_golang/prometheus"
)

// InspectTimeout bounds the listing of one scrape of NewInspector's
// collector.
const InspectTimeout = 10 * time.Second

// NewInspector returns a collector that lists the objects of in at every
// scrape (as baton ls does), for a process that watches a backend rather
// than uses it (baton serve):
//
//	baton_object_holders{backend,primitive,name}        current holders
//	baton_object_waiters{backend,primitive,name}        waiters, where the backend counts them
//	baton_object_held_seconds{backend,primitive,name}   how long the oldest holder has held it
//	baton_object_lease_seconds{backend,primitive,name}  the least lease time left of a holder
//	baton_object_last_token{backend,primitive,name}
//
// The options are New's; names past the limit are summed (holders,
// waiters) or reduced (oldest hold, least lease, highest token) under
// OtherName.
func NewInspector(in baton.Inspector, opts ...Option) prometheus.Collector {
	c := New(opts...)
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(c.cfg.namespace, "object", name), help,
			[]string{"backend", "primitive", "name"}, c.cfg.constant)
	}
	return &inspectCollector{c: c, in: in,
		holders: d("holders", "Current holders of the object."),
		waiters: d("waiters", "Waiters of the object, where the backend counts them."),
		held:    d("held_seconds", "How long the oldest current holder has held the object."),
		lease:   d("lease_seconds", "The least lease time a current holder has left."),
		token:   d("last_token", "The last fencing token given out for the object."),
	}
}

type inspectCollector struct {
	c                                    *Collector // for its options and name labels
	in                                   baton.Inspector
	holders, waiters, held, lease, token *prometheus.Desc
}

func (ic *inspectCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{ic.holders, ic.waiters, ic.held, ic.lease, ic.token} {
		ch <- d
	}
}

type objectStats struct {
	holders, waiters float64
	counted          bool // waiters known for some object
	held, lease      time.Duration
	token            baton.Token
}

func (ic *inspectCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), InspectTimeout)
	defer cancel()
	infos, err := ic.in.List(ctx)
	if err != nil && len(infos) == 0 {
		ch <- prometheus.NewInvalidMetric(ic.holders, err)
		return
	}
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
		for _, h := range in.Holders {
			if !h.Since.IsZero() {
				s.held = max(s.held, now.Sub(h.Since))
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
		ch <- prometheus.MustNewConstMetric(ic.held, prometheus.GaugeValue, s.held.Seconds(), lv...)
		if s.lease >= 0 {
			ch <- prometheus.MustNewConstMetric(ic.lease, prometheus.GaugeValue, s.lease.Seconds(), lv...)
		}
		ch <- prometheus.MustNewConstMetric(ic.token, prometheus.GaugeValue, float64(s.token), lv...)
	}
}
