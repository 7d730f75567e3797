package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
	"github.com/batonlock/baton/metrics"
)

// TestInspectorQueues: the inspecting collector (baton serve's /metrics)
// shows every queue's jobs by state, as the backend's listing counts them,
// with the names past the limit summed under "other", and how long the
// oldest ready job has waited.
func TestInspectorQueues(t *testing.T) {
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	// work/a: ready 1, delayed 1, in flight 1, dead 1; work/b and work/c:
	// ready 2 and 3.
	qa := openQueue(t, b, "work/a")
	for _, p := range []string{"claimed", "failed", "waiting"} {
		if _, err := qa.Put(ctx, []byte(p), baton.MaxAttempts(1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := qa.Put(ctx, []byte("later"), baton.Delay(time.Hour)); err != nil {
		t.Fatal(err)
	}
	held, err := qa.TryClaim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Ack(ctx)
	j, err := qa.TryClaim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Fail(ctx, "broken"); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]int{"work/b": 2, "work/c": 3} {
		q := openQueue(t, b, name)
		for range n {
			if _, err := q.Put(ctx, []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
	}

	fams := serveInspector(t, b.(baton.Inspector), metrics.WithMaxNames(1)).scrape()
	for name, want := range map[string]map[string]float64{
		"work/a":          {"ready": 1, "delayed": 1, "in_flight": 1, "dead": 1},
		metrics.OtherName: {"ready": 5, "delayed": 0, "in_flight": 0, "dead": 0},
	} {
		for state, w := range want {
			l := map[string]string{"backend": "local", "primitive": "queue", "name": name, "state": state}
			if got, ok := value(fams, "baton_object_queue_jobs", l); !ok || got != w {
				t.Errorf("queue_jobs{name=%q,state=%q} = %v (%v), want %v", name, state, got, ok, w)
			}
		}
		if got, ok := value(fams, "baton_object_queue_oldest_ready_seconds", map[string]string{"name": name}); !ok || got <= 0 || got > 60 {
			t.Errorf("oldest_ready_seconds{name=%q} = %v (%v), want the age of a job put a moment ago", name, got, ok)
		}
	}
	if _, ok := value(fams, "baton_object_queue_jobs", map[string]string{"primitive": "mutex"}); ok {
		t.Error("queue_jobs for an object that is not a queue")
	}
}

func openQueue(t *testing.T, b baton.Backend, name string) baton.Queue {
	t.Helper()
	q, err := b.Queue(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}
