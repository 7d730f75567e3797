package local_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/queuedetail"
	"github.com/batonlock/baton/local"
)

// Queues are listed and inspected (claimants as holders, counts in
// Detail), and removing one loses the claims on it.
func TestQueueInspector(t *testing.T) {
	ctx := context.Background()
	b, err := local.Open(namespace(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	in := b.(baton.Inspector)
	q, err := b.Queue(ctx, "work/q")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for range 3 {
		if _, err := q.Put(ctx, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	const waited = 100 * time.Millisecond
	time.Sleep(waited)
	j, err := q.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := in.Inspect(ctx, baton.KindQueue, "work/q")
	if err != nil {
		t.Fatal(err)
	}
	c, ok := queuedetail.Parse(info)
	if info.Kind != baton.KindQueue || len(info.Holders) != 1 || info.Holders[0].PID != os.Getpid() ||
		info.Holders[0].Token != j.Token() || info.LastToken != j.Token() ||
		!ok || c.Ready != 2 || c.Delayed != 0 || c.InFlight != 1 || c.Dead != 0 || c.Oldest < waited || c.Oldest > time.Minute {
		t.Errorf("Inspect = %+v (counts %+v)", info, c)
	}
	// A job given back is ready from then on, not from its Put.
	r, err := b.Queue(ctx, "work/r")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Put(ctx, []byte("y")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(waited)
	jr, err := r.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := jr.Retry(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if info, err := in.Inspect(ctx, baton.KindQueue, "work/r"); err != nil {
		t.Fatal(err)
	} else if c, ok := queuedetail.Parse(info); !ok || c.Ready != 1 || c.Oldest <= 0 || c.Oldest >= waited {
		t.Errorf("retried job: %q, want ready 1 with an age under %v", info.Detail, waited)
	}
	all, err := in.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, i := range all {
		found = found || i.Kind == baton.KindQueue && i.Name == "work/q"
	}
	if !found {
		t.Errorf("List = %+v, want the queue", all)
	}
	if err := in.Remove(ctx, baton.KindQueue, "work/q"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-j.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("a claim on a removed queue was not lost")
	}
	if err := j.Ack(ctx); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Ack on a removed queue: %v", err)
	}
	if _, err := in.Inspect(ctx, baton.KindQueue, "work/q"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Inspect after Remove: %v", err)
	}
}
