package word

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// shared maps the words of one lock outside the Go heap, as the futex
// mutex does, so that the race detector sees only the sync word.
func shared(t testing.TB) (state *Uint64, fence, slot *uint64) {
	b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	p := unsafe.Pointer(&b[0])
	return (*Uint64)(p), (*uint64)(unsafe.Add(p, 8)), (*uint64)(unsafe.Add(p, 16))
}

// TestCloseKeepsTokensIncreasing: one handle's goroutine takes and gives
// back the word while a closer gives back that handle's holds as the core's
// Close does, and another handle takes the word in turn. The other
// handle's tokens strictly increase and it always gives back its own hold:
// a hold given back between its TryLock's compare-and-swap and the token's
// update must not move the token back.
func TestCloseKeepsTokensIncreasing(t *testing.T) {
	state, fence, slot := shared(t)
	var gone atomic.Bool
	var sync1 atomic.Uint64
	const mask = 0xff
	xv := Make(state, fence, slot, &gone, &sync1, mask, 1)
	x := &xv
	yv := Make(state, fence, slot, &gone, &sync1, mask, 2)
	y := &yv
	stop := time.Now().Add(time.Second)
	var wg sync.WaitGroup
	var bad, holds atomic.Int64
	wg.Add(3)
	go func() { // x's goroutine
		defer wg.Done()
		for time.Now().Before(stop) {
			if _, ok := x.TryLock(0); ok {
				x.TryUnlock()
			}
		}
	}()
	go func() { // Close of x, again and again
		defer wg.Done()
		for time.Now().Before(stop) {
			if x.HeldOnWord() {
				x.TryUnlock()
			}
			runtime.Gosched()
		}
	}()
	go func() { // y
		defer wg.Done()
		var last uint64
		for time.Now().Before(stop) {
			tok, ok := y.TryLock(0)
			if !ok {
				continue
			}
			holds.Add(1)
			if tok <= last {
				bad.Add(1)
			}
			last = tok
			if !y.HeldBy(0) || !y.TryUnlock() {
				t.Error("y lost its own hold")
				return
			}
		}
	}()
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d of %d tokens of y did not exceed its previous one", n, holds.Load())
	}
	if holds.Load() == 0 {
		t.Fatal("y never held")
	}
}

// TestTokensFollowOn: the tokens drawn by the word's compare-and-swaps are
// one more each time, also where the token bits start again and the base
// moves up; a base raised meanwhile (a new opener lifting it to the
// namespace's floor) raises them all.
func TestTokensFollowOn(t *testing.T) {
	state, base, slot := shared(t)
	var gone atomic.Bool
	var sync1 atomic.Uint64
	wv := Make(state, base, slot, &gone, &sync1, 0xff, 1)
	w := &wv
	want := uint64(1)
	for i := range 3*TokenRound + 7 {
		if i == 2*TokenRound+3 {
			atomic.AddUint64(base, 1000)
			want += 1000
		}
		tok, ok := w.TryLock(0)
		if !ok || tok != want || w.Token() != want {
			t.Fatalf("hold %d: token %d (%v), Token() %d, want %d", i, tok, ok, w.Token(), want)
		}
		if !w.TryUnlock() {
			t.Fatalf("hold %d not given back", i)
		}
		want++
	}
}

// TestOwnerSlot: the owner slot, written by TryLock only when it changes,
// names the owner of each hold, whoever held before (the same owner, another
// owner of the handle, a driver grant of another handle).
func TestOwnerSlot(t *testing.T) {
	state, fence, slot := shared(t)
	var gone atomic.Bool
	var sync1 atomic.Uint64
	const mask = 0xff
	xv := Make(state, fence, slot, &gone, &sync1, mask, 1)
	x := &xv
	yv := Make(state, fence, slot, &gone, &sync1, mask, 2)
	y := &yv
	hold := func(owner, other uint64) {
		t.Helper()
		if _, ok := x.TryLock(owner); !ok {
			t.Fatalf("owner %d: word not free", owner)
		}
		if !x.HeldBy(owner) || x.HeldBy(other) || !x.HeldOnWord() || y.HeldOnWord() {
			t.Fatalf("owner %d: the slot names %d", owner, *slot)
		}
		if !x.TryUnlock() {
			t.Fatalf("owner %d: not given back", owner)
		}
	}
	hold(0, 5)
	hold(0, 5)
	hold(5, 0)
	hold(5, 0)
	// A driver grant of y, then x's word path again.
	if s := state.Load(); s&^TokenMask != 0 || !state.CompareAndSwap(s, s|2) {
		t.Fatal("word not free")
	}
	y.Granted()
	if y.HeldOnWord() || x.HeldBy(5) {
		t.Fatal("a driver grant counts as a word hold")
	}
	state.Store(Next(fence, state.Load()))
	hold(5, Driver)
	hold(0, 5)
}

// BenchmarkParts measures the parts of an uncontended Lock+Unlock on the
// word, each against sync.Mutex in the same run: the two compare-and-swaps
// that any lock on a shared word pays, the same with a token drawn by an
// atomic add between them (what the word did before its state carried the
// token's bits), and the word protocol as the core runs it (TryLock,
// HeldBy, TryUnlock). The
// core's Lock and Unlock add their calls and checks to the last
// (BenchmarkUncontended in package local).
func BenchmarkParts(b *testing.B) {
	b.Run("sync.Mutex", func(b *testing.B) {
		var mu sync.Mutex
		for b.Loop() {
			mu.Lock()
			mu.Unlock()
		}
	})
	b.Run("cas-pair", func(b *testing.B) {
		state, _, _ := shared(b)
		for b.Loop() {
			state.CompareAndSwap(0, 1)
			state.CompareAndSwap(1, 0)
		}
	})
	b.Run("cas-add-cas", func(b *testing.B) {
		state, fence, _ := shared(b)
		for b.Loop() {
			state.CompareAndSwap(0, 1)
			atomic.AddUint64(fence, 1)
			state.CompareAndSwap(1, 0)
		}
	})
	b.Run("word", func(b *testing.B) {
		state, fence, slot := shared(b)
		var gone atomic.Bool
		var sync1 atomic.Uint64
		wv := Make(state, fence, slot, &gone, &sync1, 0xff, 1)
		w := &wv
		for b.Loop() {
			if _, ok := w.TryLock(0); !ok || !w.HeldBy(0) || !w.TryUnlock() {
				b.Fatal("word not taken and given back")
			}
		}
	})
}
