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
func shared(t *testing.T) (state *atomic.Uint64, fence, slot *uint64) {
	b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	p := unsafe.Pointer(&b[0])
	return (*atomic.Uint64)(p), (*uint64)(unsafe.Add(p, 8)), (*uint64)(unsafe.Add(p, 16))
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
	x := New(state, fence, slot, &gone, &sync1, mask, 1)
	y := New(state, fence, slot, &gone, &sync1, mask, 2)
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
