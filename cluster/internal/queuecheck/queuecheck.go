// Package queuecheck holds what the network backends' queue tests share:
// the check that a backend's Inspector shows its queues, and the drain of
// a queue by many handles that their benchmarks time, each against its
// own server.
package queuecheck

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// Inspector puts jobs in every state on the queue name of b (which must
// be new, and b a baton.Inspector), and checks that Inspect and List show
// the counts by state, the age of the oldest ready job and the claim;
// then that Remove deletes its jobs, and the claim's Ack returns ErrLost.
func Inspector(t *testing.T, b baton.Backend, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in := b.(baton.Inspector)
	if _, err := in.Inspect(ctx, baton.KindQueue, name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Inspect of a queue never used: %v, want fs.ErrNotExist", err)
	}
	q, err := b.Queue(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = q.Put(ctx, []byte("dead"), baton.MaxAttempts(1))
	must(err)
	claimed, err := q.Put(ctx, []byte("claimed"))
	must(err)
	_, err = q.Put(ctx, []byte("later"), baton.Delay(time.Hour))
	must(err)
	j, err := q.Claim(ctx)
	must(err)
	must(j.Fail(ctx, "checked"))
	j, err = q.Claim(ctx)
	must(err)
	if j.ID() != claimed {
		t.Fatalf("claimed job %d, want %d", j.ID(), claimed)
	}
	_, err = q.Put(ctx, []byte("ready"))
	must(err)
	const wait = 50 * time.Millisecond
	time.Sleep(wait) // the ready job's age
	info, err := in.Inspect(ctx, baton.KindQueue, name)
	must(err)
	const counts = "ready 1, delayed 1, in flight 1, dead 1, oldest ready "
	age, ok := strings.CutPrefix(info.Detail, counts)
	if d, err := time.ParseDuration(age); !ok || err != nil || d < wait || d > time.Minute {
		t.Errorf("Detail %q: want %q and an age over %v", info.Detail, counts, wait)
	}
	if info.Kind != baton.KindQueue || info.Name != name || len(info.Holders) != 1 ||
		!strings.Contains(info.Holders[0].Owner, fmt.Sprint("job ", claimed)) {
		t.Errorf("Inspect: %+v, want the claim of job %d as its holder", info, claimed)
	}
	list, err := in.List(ctx)
	must(err)
	found := false
	for _, o := range list {
		if o.Kind == baton.KindQueue && o.Name == name {
			found = strings.HasPrefix(o.Detail, counts)
		}
	}
	if !found {
		t.Errorf("List lacks queue %q with %q: %+v", name, counts, list)
	}
	must(in.Remove(ctx, baton.KindQueue, name))
	if err := j.Ack(ctx); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Ack after Remove: %v, want ErrLost", err)
	}
	// A backend may keep the queue's counters (so that its tokens keep
	// increasing): then it shows an empty queue.
	if info, err := in.Inspect(ctx, baton.KindQueue, name); !errors.Is(err, fs.ErrNotExist) && (err != nil || info.Detail != "ready 0, delayed 0, in flight 0, dead 0") {
		t.Errorf("Inspect after Remove: %+v, %v, want fs.ErrNotExist or an empty queue", info, err)
	}
}

// Stats checks that q's counts are want.
func Stats(t *testing.T, ctx context.Context, q baton.Queue, want baton.QueueStats) {
	t.Helper()
	if s, err := q.Stats(ctx); err != nil || s != want {
		t.Errorf("stats %+v (%v), want %+v", s, err, want)
	}
}
