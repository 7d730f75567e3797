package zklock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// TestWaiterOutlivesLateHeartbeat: when the epoch ends because a heartbeat
// came too late but the session lives on, holds are lost and waiters keep
// their place: a waiter queued behind another client is granted once that
// client lets go, on a new epoch of the same session.
func TestWaiterOutlivesLateHeartbeat(t *testing.T) {
	addr := standalone(t)
	ctx := context.Background()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	raw, err := dial(dctx, "zk://"+addr+"/late?ttl=5s", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := baton.NewBackend(raw)
	defer b.Close()
	other := open(t, "zk://"+addr+"/late?ttl=5s")
	name := fmt.Sprintf("late-%d", time.Now().UnixNano())
	mo, err := other.Mutex(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer mo.Close()
	mine, err := b.Mutex(ctx, name+"-mine")
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	w, err := b.Mutex(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	if _, err := mo.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	held, err := mine.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := w.Lock(wctx)
		res <- err
	}()
	time.Sleep(200 * time.Millisecond) // w queues
	e := raw.cur.Load()
	e.end(errDeadline) // as the epoch's timer does when a heartbeat is late

	if err := held.Err(); !errors.Is(err, baton.ErrLost) {
		t.Errorf("hold of the ended epoch: Err %v, want ErrLost", err)
	}
	select {
	case err := <-res:
		t.Fatalf("the waiter returned %v while its session lives", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := mo.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Fatalf("the waiter after the other client let go: %v", err)
	}
	if cur := raw.cur.Load(); cur == e || cur.sid != e.sid {
		t.Errorf("the grant is not on a new epoch of the same session")
	}
	if err := w.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
	if err := mine.Unlock(ctx); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Unlock of the lost hold: %v, want ErrLost", err)
	}
}
