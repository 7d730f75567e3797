//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package ipc

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// A NamedSet's incarnation loses its holds when the set is removed; the
// handles that find it removed all move to one new set, and the old one's
// loss fires.
func TestNamedSetRemoval(t *testing.T) {
	ns := sysvNS(t)
	e, err := ns.Entry(KindSysvSem, "set/one")
	if err != nil {
		t.Fatal(err)
	}
	init := func(s *SemSet) error { return s.TryOp([]SemOp{{Num: 0, Op: 2}}) }
	if _, err := OpenNamedSet(e, KindSysvRW, "test", 1, 2, init); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Fatalf("entry of another kind: %v", err)
	}
	s, err := OpenNamedSet(e, KindSysvSem, "test", 1, 2, init)
	if err != nil {
		t.Fatal(err)
	}
	old, err := s.Current()
	if err != nil {
		t.Fatal(err)
	}
	if g := old.Grant(driver.Shared); g.Inc != old || g.Mode != driver.Shared || old.Grant(driver.Exclusive).Mode != driver.Exclusive {
		t.Fatalf("grant data %+v", g)
	}
	c1, err := old.NextCounter()
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Set.Remove(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-old.Loss.Done():
	case <-time.After(10 * WatchEvery):
		t.Fatal("removal not noticed")
	}
	if !errors.Is(old.Loss.Err(), baton.ErrLost) {
		t.Fatalf("loss: %v", old.Loss.Err())
	}
	var wg sync.WaitGroup
	got := make([]*SetIncarnation, 4)
	for i := range got {
		wg.Go(func() {
			inc, err := s.Reopen(old)
			if err != nil {
				t.Error(err)
			}
			got[i] = inc
		})
	}
	wg.Wait()
	for _, inc := range got {
		if inc != got[0] || inc == old {
			t.Fatalf("reopens gave %v, old %p", got, old)
		}
	}
	if v, _ := got[0].Set.Value(0); v != 2 {
		t.Fatalf("new set value %d", v)
	}
	if c2, _ := got[0].Counter(); c2 < c1 {
		t.Fatalf("counter went back across incarnations: %d < %d", c2, c1)
	}
	if got[0].Loss.Err() != nil {
		t.Fatalf("new set lost: %v", got[0].Loss.Err())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Current(); !errors.Is(err, baton.ErrClosed) {
		t.Fatalf("Current after Close: %v", err)
	}
	if _, err := s.Reopen(got[0]); !errors.Is(err, baton.ErrClosed) {
		t.Fatalf("Reopen after Close: %v", err)
	}
}

// Do tries at once, then waits only when asked to.
func TestSemSetDo(t *testing.T) {
	set, _, err := CreateSemSet(1)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Remove()
	take := func() []SemOp { return []SemOp{{Num: 0, Op: -1, Flags: SemUndo}} }
	if err := set.Do(context.Background(), take(), false); !errors.Is(err, ErrWouldBlock) {
		t.Fatalf("no wait on 0: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := set.Do(ctx, take(), true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait past the deadline: %v", err)
	}
	if v, _ := set.Value(0); v != 0 {
		t.Fatalf("failed operations changed the value to %d", v)
	}
	go func() {
		time.Sleep(10 * time.Millisecond)
		_ = set.TryOp([]SemOp{{Num: 0, Op: 1}})
	}()
	if err := set.Do(context.Background(), take(), true); err != nil {
		t.Fatalf("wait for a post: %v", err)
	}
	if err := set.Do(context.Background(), []SemOp{{Num: 0, Op: 1, Flags: SemUndo}}, false); err != nil {
		t.Fatal(err)
	}
}
