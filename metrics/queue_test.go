package metrics_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
	"github.com/batonlock/baton/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// TestQueueMetrics: claims of a local queue count as acquisitions with
// their wait, their ends by result (acked, retried, dead), and the queue
// collector shows the jobs by state, and up 0 once the queue is closed.
func TestQueueMetrics(t *testing.T) {
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := metrics.New()
	if err := baton.Observe(b, c); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q, err := b.Queue(ctx, "work")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, metrics.NewQueueCollector([]baton.Queue{q}))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	s := &scraper{t: t, url: srv.URL + "/metrics"}

	for _, p := range []string{"a", "b", "c"} {
		if _, err := q.Put(ctx, []byte(p), baton.MaxAttempts(1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Put(ctx, []byte("d"), baton.MaxAttempts(2)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		j, err := q.TryClaim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		switch i {
		case 0:
			err = j.Ack(ctx)
		case 1:
			err = j.Fail(ctx, "broken") // its only attempt: dead
		case 2:
			err = j.Retry(ctx, 0) // its only attempt: dead
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	j, err := q.TryClaim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Fail(ctx, "again"); err != nil { // attempt 1 of 2: retried
		t.Fatal(err)
	}
	fams := s.scrape()
	qn := map[string]string{"backend": "local", "name": "work"}
	for result, want := range map[string]float64{"acked": 1, "dead": 2, "retried": 1} {
		l := map[string]string{"result": result}
		for k, v := range qn {
			l[k] = v
		}
		if got, _ := value(fams, "baton_queue_jobs_total", l); got != want {
			t.Errorf("queue_jobs_total{result=%q} = %v, want %v", result, got, want)
		}
	}
	if got, _ := value(fams, "baton_acquisitions_total", map[string]string{"primitive": "queue", "name": "work", "result": "granted"}); got != 4 {
		t.Errorf("claims granted: %v, want 4", got)
	}
	if got, _ := value(fams, "baton_wait_seconds", map[string]string{"primitive": "queue", "name": "work"}); got != 4 {
		t.Errorf("claim waits observed: %v, want 4", got)
	}
	for state, want := range map[string]float64{"ready": 1, "delayed": 0, "in_flight": 0, "dead": 2} {
		if got, ok := value(fams, "baton_queue_jobs", map[string]string{"name": "work", "state": state}); !ok || got != want {
			t.Errorf("queue_jobs{state=%q} = %v (%v), want %v", state, got, ok, want)
		}
	}
	if got, _ := value(fams, "baton_queue_up", map[string]string{"name": "work"}); got != 1 {
		t.Errorf("queue_up = %v, want 1", got)
	}
	q.Close()
	if got, _ := value(s.scrape(), "baton_queue_up", map[string]string{"name": "work"}); got != 0 {
		t.Errorf("queue_up of a closed queue = %v, want 0", got)
	}
}
