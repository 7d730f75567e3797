package pglock

import (
	"context"
	"testing"
	"time"
)

// TestValueListenerLost: a write made while the Backend's LISTEN
// connection is down is not notified to it; the waiter must still see it
// once the listener is back, since waiters do not poll.
func TestValueListenerLost(t *testing.T) {
	url := need(t)
	ctx := context.Background()
	waiter, writer := openT(t, url), openT(t, url)
	w, err := waiter.Value(ctx, "value/listener-lost")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	v, err := writer.Value(ctx, "value/listener-lost")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for round := range 3 {
		_, cur, err := v.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan uint64, 1)
		go func() {
			_, ver, err := w.Wait(ctx, cur)
			if err != nil {
				t.Error(err)
			}
			got <- ver
		}()
		time.Sleep(100 * time.Millisecond) // the Wait listens
		admin(t, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN %' AND pid <> pg_backend_pid()")
		next, err := v.CompareAndSwap(ctx, cur, []byte{byte(round)})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case ver := <-got:
			if ver != next {
				t.Errorf("round %d: Wait returned version %d, want %d", round, ver, next)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: a write made while the listener was down never woke the waiter", round)
		}
	}
}
