package recipetest

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
	"github.com/batonlock/baton/locktest"
	"github.com/batonlock/baton/recipe"
)

// testMultiHammer runs Hammer on two Backends of the suite's store.
func testMultiHammer(t *testing.T, e *env) {
	b1, b2 := e.open(t), e.open(t)
	Hammer(t, []Store{{Name: e.s.Name, Backends: []baton.Backend{b1, b2}}}, e.name(t), 5, 8, 2*time.Second)
}

// multiLock opens the MultiLock of names on b, closed when the test ends.
func (e *env) multiLock(t testing.TB, b baton.Backend, names []string) *recipe.MultiLock {
	t.Helper()
	ml, err := recipe.NewMultiLock(bg(), recipe.Parts(e.s.Name, b, names...)...)
	return closeAtEnd(t, "NewMultiLock", ml, err)
}

// names returns n names of the test, listed out of their sorted order.
func (e *env) names(t *testing.T, n int) []string {
	base := e.name(t)
	ns := make([]string, n)
	for i := range ns {
		ns[i] = fmt.Sprintf("%s/%c", base, 'a'+rune(n-1-i))
	}
	return ns
}

// free fails the test unless another Backend can take each name at once.
func free(t *testing.T, b baton.Backend, names ...string) {
	t.Helper()
	for _, n := range names {
		m, err := b.Mutex(bg(), n)
		ok(t, "Mutex", err)
		if _, err := m.TryLock(bg()); err != nil {
			t.Errorf("%s is not free: %v", n, err)
		} else {
			ok(t, "Unlock", m.Unlock(bg()))
		}
		ok(t, "Close", m.Close())
	}
}

// taken fails the test unless each name is taken.
func taken(t *testing.T, b baton.Backend, names ...string) {
	t.Helper()
	for _, n := range names {
		m, err := b.Mutex(bg(), n)
		ok(t, "Mutex", err)
		if _, err := m.TryLock(bg()); !errors.Is(err, baton.ErrLocked) {
			t.Errorf("TryLock of %s held by a MultiLock: %v, want ErrLocked", n, err)
			if err == nil {
				_ = m.Unlock(bg())
			}
		}
		ok(t, "Close", m.Close())
	}
}

// Parts given out of order are all held, each Hold(i) belongs to the i-th
// name given, and Unlock frees them all.
func testMultiOrder(t *testing.T, e *env) {
	b, other := e.open(t), e.open(t)
	names := e.names(t, 4)
	ml := e.multiLock(t, b, names)
	h, err := ml.Lock(bg())
	ok(t, "Lock", err)
	taken(t, other, names...)
	if in, isInspector := other.(baton.Inspector); isInspector {
		checked := 0
		for i, n := range names {
			info, err := in.Inspect(bg(), baton.KindMutex, n)
			ok(t, "Inspect", err)
			if len(info.Holders) != 1 || info.Holders[0].Token == 0 {
				continue
			}
			checked++
			if got, want := h.Token(i), info.Holders[0].Token; got != want {
				t.Errorf("Token(%d) = %d, the holder of %s has %d", i, got, n, want)
			}
		}
		t.Logf("tokens checked against %d holders", checked)
	}
	if err := h.Err(); err != nil {
		t.Errorf("Err of a fresh hold: %v", err)
	}
	ok(t, "Unlock", ml.Unlock(bg()))
	select {
	case <-h.Lost():
		t.Error("Lost closed by a normal Unlock")
	default:
	}
	if err := ml.Unlock(bg()); !errors.Is(err, baton.ErrNotHeld) {
		t.Errorf("second Unlock: %v, want ErrNotHeld", err)
	}
	free(t, other, names...)
}

// TryLock takes nothing when any part is taken: the parts before it in the
// order are given back.
func testMultiTry(t *testing.T, e *env) {
	b, other := e.open(t), e.open(t)
	names := e.names(t, 3) // sorted order: names[2], names[1], names[0]
	ml := e.multiLock(t, b, names)
	for _, blocked := range []int{0, 1, 2} {
		m, err := other.Mutex(bg(), names[blocked])
		ok(t, "Mutex", err)
		_, err = m.Lock(ctx20(t))
		ok(t, "Lock", err)
		if _, err := ml.TryLock(bg()); !errors.Is(err, baton.ErrLocked) {
			t.Fatalf("TryLock with %s taken: %v, want ErrLocked", names[blocked], err)
		}
		ok(t, "Unlock", m.Unlock(bg()))
		ok(t, "Close", m.Close())
		free(t, other, names...)
	}
	_, err := ml.TryLock(bg())
	ok(t, "TryLock of free parts", err)
	taken(t, other, names...)
	ok(t, "Unlock", ml.Unlock(bg()))
}

// A Lock whose context ends while it waits for a part holds nothing after.
func testMultiCancel(t *testing.T, e *env) {
	b, other := e.open(t), e.open(t)
	names := e.names(t, 3)
	ml := e.multiLock(t, b, names)
	m, err := other.Mutex(bg(), names[0]) // the last in the order
	ok(t, "Mutex", err)
	defer m.Close()
	_, err = m.Lock(ctx20(t))
	ok(t, "Lock", err)
	ctx, cancel := context.WithTimeout(bg(), 100*time.Millisecond)
	_, err = ml.Lock(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with a part taken, context ended: %v", err)
	}
	free(t, other, names[1:]...)
	got := make(chan error, 1)
	go func() {
		_, err := ml.Lock(bg())
		got <- err
	}()
	time.Sleep(20 * time.Millisecond)
	ok(t, "Unlock", m.Unlock(bg()))
	returns(t, 30*time.Second, "Lock once the part is free", got)
	ok(t, "Unlock", ml.Unlock(bg()))
}

// The combined hold is lost as soon as one part is: Lost closes, Err and
// the Context report it, and Unlock gives back the others and reports it.
func testMultiLost(t *testing.T, e *env) {
	if e.s.LossBound == 0 {
		t.Skip("no loss bound")
	}
	b, other := e.open(t), e.open(t)
	in, isInspector := other.(baton.Inspector)
	if !isInspector {
		t.Skip("the backend is not an Inspector")
	}
	names := e.names(t, 3)
	ml := e.multiLock(t, b, names)
	h, err := ml.Lock(bg())
	ok(t, "Lock", err)
	ctx, cancel := h.Context(bg())
	defer cancel()
	lost := h.Lost()
	if lost == nil {
		t.Fatal("Lost of a hold whose parts can be lost is nil")
	}
	ok(t, "Remove", in.Remove(bg(), baton.KindMutex, names[1]))
	select {
	case <-lost:
	case <-time.After(e.s.LossBound):
		t.Fatalf("Lost not closed %v after a part was removed", e.s.LossBound)
	}
	if err := h.Err(); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Err after the loss of a part: %v", err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
		t.Error("Context not cancelled after the loss of a part")
	}
	if err := ml.Unlock(bg()); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Unlock after the loss of a part: %v, want ErrLost", err)
	}
	free(t, other, names[0], names[2])
}

// Store is one store of a Hammer: Backends opened on it (several, so that
// parts also wait for each other across handles of separate Backends).
type Store struct {
	Name     string
	Backends []baton.Backend
}

// Hammer runs goroutines that lock random sets of up to three of n names
// per store, listed in random order, with Lock (some with contexts that end
// within a few milliseconds) and TryLock, for about d. It fails the test if
// a Lock waits so long that it looks like a deadlock, if two holds of one
// name overlap or their tokens do not increase (locktest.Check), or if a
// name is left taken.
func Hammer(t *testing.T, stores []Store, prefix string, n, goroutines int, d time.Duration) {
	type key struct{ store, name int }
	var keys []key
	for s := range stores {
		for i := range n {
			keys = append(keys, key{s, i})
		}
	}
	name := func(i int) string { return fmt.Sprintf("%s/h%d", prefix, i) }
	hist := make(map[key]*locktest.History)
	for _, k := range keys {
		hist[k] = new(locktest.History)
	}
	var locks, cancels, refused atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			for it := 0; time.Now().Before(deadline) && !t.Failed(); it++ {
				set := make([]key, len(keys))
				copy(set, keys)
				rng.Shuffle(len(set), func(i, j int) { set[i], set[j] = set[j], set[i] })
				set = set[:1+rng.IntN(min(3, len(set)))]
				parts := make([]recipe.Part, len(set))
				for i, k := range set {
					st := stores[k.store]
					parts[i] = recipe.Part{Store: st.Name, Backend: st.Backends[rng.IntN(len(st.Backends))], Name: name(k.name)}
				}
				ml, err := recipe.NewMultiLock(bg(), parts...)
				if err != nil {
					t.Errorf("NewMultiLock: %v", err)
					return
				}
				var h *recipe.MultiHold
				switch r := rng.IntN(10); {
				case r < 7:
					ctx, cancel := context.WithTimeout(bg(), 10*time.Second)
					h, err = ml.Lock(ctx)
					cancel()
					if err != nil {
						t.Errorf("Lock of %v (a deadlock?): %v", parts, err)
					}
				case r < 8:
					ctx, cancel := context.WithTimeout(bg(), time.Duration(rng.IntN(3000))*time.Microsecond)
					h, err = ml.Lock(ctx)
					cancel()
					if err != nil && !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("Lock with a short context: %v", err)
					}
					if err != nil {
						cancels.Add(1)
					}
				default:
					h, err = ml.TryLock(bg())
					if err != nil && !errors.Is(err, baton.ErrLocked) {
						t.Errorf("TryLock: %v", err)
					}
					if err != nil {
						refused.Add(1)
					}
				}
				if err == nil {
					start := locktest.Mono()
					if rng.IntN(4) == 0 {
						time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
					}
					end := locktest.Mono()
					if err := h.Err(); err != nil {
						t.Errorf("hold lost while held: %v", err)
					}
					for i, k := range set {
						hist[k].Add(locktest.Rec{Start: start, End: end, Exclusive: true, Token: uint64(h.Token(i)), N: 1, Who: fmt.Sprintf("g%d/%d", g, it)})
					}
					if err := ml.Unlock(bg()); err != nil {
						t.Errorf("Unlock: %v", err)
					}
					locks.Add(1)
				}
				if err := ml.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}
		})
	}
	wg.Wait()
	for _, k := range keys {
		for _, err := range locktest.Check(hist[k].Records(), 0) {
			t.Errorf("%s %s: %v", stores[k.store].Name, name(k.name), err)
		}
	}
	for _, st := range stores {
		for i := range n {
			free(t, st.Backends[0], name(i))
		}
	}
	t.Logf("%d multi-locks held, %d cancelled, %d refused by TryLock", locks.Load(), cancels.Load(), refused.Load())
}
