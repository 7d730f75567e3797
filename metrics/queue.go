package metrics

import (
	"context"
	"time"

	"github.com/batonlock/baton"
	"github.com/prometheus/client_golang/prometheus"
)

// queueJob counts the end of a claim of a queue job: Op "ack", or "retry"
// and "fail", which made the job a dead letter when N is 1.
func (c *Collector) queueJob(e *baton.Event, name string) {
	result := "retried"
	switch {
	case e.Op == "ack":
		result = "acked"
	case e.N == 1:
		result = "dead"
	}
	c.queueJobs.WithLabelValues(e.Backend, name, result).Inc()
}

// QueueTimeout bounds the Stats of one queue in a scrape of
// NewQueueCollector's collector.
const QueueTimeout = 5 * time.Second

// NewQueueCollector returns a collector that reads the counts of the given
// queues at every scrape (Queue.Stats):
//
//	baton_queue_jobs{name,state}   state: ready, delayed, in_flight, dead
//	baton_queue_up{name}           1 if the last Stats succeeded, else 0
//
// The queues stay the caller's: closing one makes its up read 0.
func NewQueueCollector(queues []baton.Queue, opts ...Option) prometheus.Collector {
	c := New(opts...)
	return &queueCollector{qs: queues,
		jobs: prometheus.NewDesc(prometheus.BuildFQName(c.cfg.namespace, "queue", "jobs"),
			"Jobs of the queue by state.", []string{"name", "state"}, c.cfg.constant),
		up: prometheus.NewDesc(prometheus.BuildFQName(c.cfg.namespace, "queue", "up"),
			"1 if the last Stats of the queue succeeded, 0 if it failed.", []string{"name"}, c.cfg.constant),
	}
}

type queueCollector struct {
	qs       []baton.Queue
	jobs, up *prometheus.Desc
}

func (qc *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- qc.jobs
	ch <- qc.up
}

func (qc *queueCollector) Collect(ch chan<- prometheus.Metric) {
	for _, q := range qc.qs {
		ctx, cancel := context.WithTimeout(context.Background(), QueueTimeout)
		s, err := q.Stats(ctx)
		cancel()
		if err != nil {
			ch <- prometheus.MustNewConstMetric(qc.up, prometheus.GaugeValue, 0, q.Name())
			continue
		}
		ch <- prometheus.MustNewConstMetric(qc.up, prometheus.GaugeValue, 1, q.Name())
		for _, st := range []struct {
			state string
			n     int
		}{{"ready", s.Ready}, {"delayed", s.Delayed}, {"in_flight", s.InFlight}, {"dead", s.Dead}} {
			ch <- prometheus.MustNewConstMetric(qc.jobs, prometheus.GaugeValue, float64(st.n), q.Name(), st.state)
		}
	}
}
