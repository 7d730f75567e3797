package driver

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/batonlock/baton/internal/errs"
)

// A Loss is made per hold or per handle: it must stay in the 48-byte size
// class, which keeps a Redis or local handle under its heap bound.
func TestLossSize(t *testing.T) {
	if n := unsafe.Sizeof(Loss{}); n > 48 {
		t.Errorf("a Loss takes %d bytes, want at most 48", n)
	}
}

type countWatcher struct {
	n   int
	err error
}

func (c *countWatcher) LossFired(err error) { c.n++; c.err = err }

// One watcher is told once: when the Loss fires, or at Watch when it fired
// before; Unwatch and Told report it.
func TestLossWatcherToldOnce(t *testing.T) {
	l := NewLoss()
	w := &countWatcher{}
	l.Watch(w)
	if l.Told() {
		t.Fatal("Told before the Loss fired")
	}
	cause := errors.New("lease gone")
	l.Fire(cause)
	l.Fire(cause)
	if w.n != 1 || !errors.Is(w.err, errs.Lost) || !errors.Is(w.err, cause) {
		t.Fatalf("watcher told %d times, err %v", w.n, w.err)
	}
	w2 := &countWatcher{}
	l.Watch(w2)
	if w2.n != 0 || !l.Told() || !l.Unwatch() || !l.Told() {
		t.Fatalf("second watcher told %d times; Told %v", w2.n, l.Told())
	}

	// Fired with no watcher: the first Watch is told at once, a second not.
	l = NewLoss()
	l.Fire(nil)
	w3, w4 := &countWatcher{}, &countWatcher{}
	l.Watch(w3)
	l.Watch(w4)
	if w3.n != 1 || w4.n != 0 || !l.Told() {
		t.Fatalf("told %d and %d times", w3.n, w4.n)
	}

	// Unwatched before the loss: nobody is told.
	l = NewLoss()
	w5 := &countWatcher{}
	l.Watch(w5)
	if l.Unwatch() {
		t.Fatal("Unwatch reported a loss that did not fire")
	}
	l.Fire(nil)
	if w5.n != 0 || l.Told() {
		t.Fatalf("unwatched watcher told %d times", w5.n)
	}
}
