package locktest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// observeTally counts the core's events by type, and the errors of class
// "locked", for testObserved.
type observeTally struct {
	n      [8]atomic.Int64
	locked atomic.Int64
	bad    atomic.Value // string: the first malformed event
}

func (o *observeTally) Observe(e baton.Event) {
	if int(e.Type) < len(o.n) {
		o.n[e.Type].Add(1)
	}
	if e.Type == baton.EventError && baton.ErrorClass(e.Err) == "locked" {
		o.locked.Add(1)
	}
	if e.Backend == "" || e.Op == "" || e.Wait < 0 || e.Held < 0 {
		o.bad.CompareAndSwap(nil, fmt.Sprintf("%+v", e))
	}
}

// testObserved: with an Observer attached, 4 handles × 4 goroutines lock
// one name, some giving up while they wait. The core reports every
// acquisition once as started and once as ended, grants and releases that
// match the callers' own counts, and a refused TryLock as an error of
// class "locked", whatever the backend.
func testObserved(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	var o observeTally
	ok(t, "Observe", baton.Observe(b, &o))
	const handles, goroutines = 4, 4
	ms := make([]baton.Mutex, handles)
	for i := range ms {
		var err error
		ms[i], err = b.Mutex(ctx, name)
		ok(t, "Mutex", err)
		defer ms[i].Close()
	}
	var granted, failed atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(300 * time.Millisecond)
	for i := range handles * goroutines {
		wg.Go(func() {
			m := ms[i%handles]
			for time.Now().Before(stop) {
				lctx, cancel := context.WithCancel(ctx)
				if rand.IntN(4) == 0 {
					time.AfterFunc(time.Duration(rand.IntN(300))*time.Microsecond, cancel)
				}
				_, err := m.Lock(lctx)
				cancel()
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						t.Errorf("Lock: %v", err)
						return
					}
					failed.Add(1)
					continue
				}
				granted.Add(1)
				if err := m.Unlock(ctx); err != nil {
					t.Errorf("Unlock: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if _, err := ms[0].Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if _, err := ms[1].TryLock(ctx); !errors.Is(err, baton.ErrLocked) {
		t.Errorf("TryLock while held: %v, want ErrLocked", err)
	} else {
		failed.Add(1)
	}
	granted.Add(1)
	ok(t, "Unlock", ms[0].Unlock(ctx))
	want := map[baton.EventType]int64{
		baton.EventAcquire:  granted.Load() + failed.Load(),
		baton.EventAcquired: granted.Load(),
		baton.EventFailed:   failed.Load(),
		baton.EventReleased: granted.Load(),
		baton.EventLost:     0,
	}
	for typ, n := range want {
		if got := o.n[typ].Load(); got != n {
			t.Errorf("%d %v events, want %d", got, typ, n)
		}
	}
	if o.locked.Load() != 1 {
		t.Errorf("%d errors of class locked, want 1 (the TryLock)", o.locked.Load())
	}
	if bad := o.bad.Load(); bad != nil {
		t.Errorf("malformed event: %s", bad)
	}
	t.Logf("%d granted, %d failed, %d passed between handles", granted.Load(), failed.Load(), o.n[baton.EventPassed].Load())
}
