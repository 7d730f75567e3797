package local_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/batonlock/baton"
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
	j, err := q.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := in.Inspect(ctx, baton.KindQueue, "work/q")
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != baton.KindQueue || len(info.Holders) != 1 || info.Holders[0].PID != os.Getpid() ||
		info.Holders[0].Token != j.Token() || info.LastToken != j.Token() || info.Detail != "ready 2, delayed 0, in flight 1, dead 0" {
		t.Errorf("Inspect = %+v", info)
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
