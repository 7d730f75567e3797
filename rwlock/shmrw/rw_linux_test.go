//go:build linux

package shmrw

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

func acquireAsync(l *RW, mode driver.Mode) <-chan driver.Grant {
	ch := make(chan driver.Grant, 1)
	go func() {
		g, err := l.Acquire(context.Background(), mode)
		if err != nil {
			g.Data = err
		}
		ch <- g
	}()
	return ch
}

func got(t *testing.T, ch <-chan driver.Grant, what string) driver.Grant {
	t.Helper()
	select {
	case g := <-ch:
		if err, ok := g.Data.(error); ok {
			t.Fatalf("%s: %v", what, err)
		}
		return g
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not granted", what)
	}
	return driver.Grant{}
}

func notYet(t *testing.T, ch <-chan driver.Grant, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s: granted too early", what)
	case <-time.After(30 * time.Millisecond):
	}
}

// A writer SIGKILLed while holding: a waiting writer and a waiting reader
// both get in, and the first grant after the death reports Recovered.
func TestKillWriter(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	for _, mode := range []driver.Mode{driver.Exclusive, driver.Shared} {
		h := spawn(t, ns, "w", "write")
		h.expect(t, "held")
		l := open(t, ns, "w")
		ch := acquireAsync(l, mode)
		notYet(t, ch, "waiter behind a live writer")
		h.kill()
		g := got(t, ch, mode.String()+" waiter after the writer was killed")
		if !g.Recovered {
			t.Errorf("%s grant after a dead writer: not Recovered", mode)
		}
		if err := l.Release(ctx, g); err != nil {
			t.Fatal(err)
		}
		if g, err := l.TryAcquire(ctx, driver.Exclusive); err != nil || g.Recovered {
			t.Fatalf("TryAcquire after recovery: %v, recovered %v", err, g.Recovered)
		} else if err := l.Release(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
}

// A reader SIGKILLed while holding: a writer draining readers reclaims its
// share; TryAcquire does too.
func TestKillReader(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	l := open(t, ns, "r")
	h := spawn(t, ns, "r", "read")
	h.expect(t, "held")
	ch := acquireAsync(l, driver.Exclusive)
	notYet(t, ch, "writer behind a live reader")
	h.kill()
	g := got(t, ch, "writer after the reader was killed")
	if g.Recovered {
		t.Error("a dead reader made the writer's grant Recovered")
	}
	if err := l.Release(ctx, g); err != nil {
		t.Fatal(err)
	}

	h = spawn(t, ns, "r", "read")
	h.expect(t, "held")
	if _, err := l.TryAcquire(ctx, driver.Exclusive); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("TryAcquire behind a live reader: %v", err)
	}
	h.kill()
	g, err := l.TryAcquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatalf("TryAcquire behind a dead reader: %v", err)
	}
	if err := l.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
}

// Writer preference: once a writer (of another process) waits, new readers
// wait; a writer that dies waiting stops holding them back.
func TestWriterPreference(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	l := open(t, ns, "p")
	r, err := l.Acquire(ctx, driver.Shared)
	if err != nil {
		t.Fatal(err)
	}
	ww := spawn(t, ns, "p", "waitwrite")
	ww.expect(t, "waiting")
	waitFor(t, "writer waiting", func() bool { in, _ := Inspect(ns, "p"); return in.Waiters == 1 })
	r2 := open(t, ns, "p")
	if _, err := r2.TryAcquire(ctx, driver.Shared); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("new reader while a writer waits: %v", err)
	}
	ch := acquireAsync(r2, driver.Shared)
	notYet(t, ch, "new reader while a writer waits")
	if err := l.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	line := ww.expect(t, "held")
	notYet(t, ch, "reader while the writer holds")
	ww.in.WriteString("\n")
	ww.expect(t, "released")
	g := got(t, ch, "reader after the writer")
	if err := r2.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	if tok, _ := strconv.Atoi(strings.TrimPrefix(line, "held ")); tok < 1 {
		t.Fatalf("writer token %q", line)
	}

	// A writer killed while waiting.
	r, err = l.Acquire(ctx, driver.Shared)
	if err != nil {
		t.Fatal(err)
	}
	ww = spawn(t, ns, "p", "waitwrite")
	ww.expect(t, "waiting")
	waitFor(t, "writer waiting", func() bool { in, _ := Inspect(ns, "p"); return in.Waiters == 1 })
	ch = acquireAsync(r2, driver.Shared)
	notYet(t, ch, "new reader while a writer waits")
	ww.kill()
	g = got(t, ch, "reader after the waiting writer was killed")
	for _, x := range []struct {
		l *RW
		g driver.Grant
	}{{l, r}, {r2, g}} {
		if err := x.l.Release(ctx, x.g); err != nil {
			t.Fatal(err)
		}
	}
}

// Downgrade keeps the lock: a waiting writer gets in only after the read
// hold that the downgrade left is released, with a greater token.
func TestDowngrade(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	l := open(t, ns, "d")
	w, err := l.Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	ww := spawn(t, ns, "d", "waitwrite")
	ww.expect(t, "waiting")
	waitFor(t, "writer waiting", func() bool { in, _ := Inspect(ns, "d"); return in.Waiters == 1 })
	r, err := l.Downgrade(ctx, w)
	if err != nil || r.Token != w.Token {
		t.Fatalf("Downgrade: %v, token %d of %d", err, r.Token, w.Token)
	}
	// The waiting writer may take the word at once and show as holder while
	// it waits for this read hold to drain: the read hold must be there.
	in, _ := Inspect(ns, "d")
	if !slices.ContainsFunc(in.Holders, func(h baton.Holder) bool { return h.Mode == "shared" && h.PID == os.Getpid() }) {
		t.Fatalf("after Downgrade: %+v", in)
	}
	if _, err := l.Downgrade(ctx, r); !errors.Is(err, baton.ErrNotHeld) {
		t.Fatalf("Downgrade of a read grant: %v", err)
	}
	lines := make(chan string, 1)
	go func() { line, _ := ww.out.ReadString('\n'); lines <- line }()
	select {
	case line := <-lines:
		t.Fatalf("writer got in while the downgraded hold is held: %q", line)
	case <-time.After(30 * time.Millisecond):
	}
	if err := l.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(<-lines)
	if tok, _ := strconv.ParseUint(strings.TrimPrefix(line, "held "), 10, 64); tok <= w.Token {
		t.Fatalf("next writer: %q, want a token above %d", line, w.Token)
	}
}

// A state word or slot that names this process's pid with another start
// time belongs to a dead process that had the pid before.
func TestPIDReuse(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	l := open(t, ns, "u")
	other := uint64(l.self.Tag()+1)<<32 | uint64(l.self.PID)
	l.state.Store(other)
	g, err := l.Acquire(ctx, driver.Shared)
	if err != nil || !g.Recovered {
		t.Fatalf("reader over a writer of a reused pid: %v, recovered %v", err, g.Recovered)
	}
	if err := l.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	l2 := open(t, ns, "u")
	l2.slot.Store(other | sRead)
	g, err = l.TryAcquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatalf("writer over a reader of a reused pid: %v", err)
	}
	if err := l.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
}

// A cancelled waiter returns promptly and leaves nothing behind.
func TestCancel(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	l := open(t, ns, "c")
	w, err := l.Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []driver.Mode{driver.Exclusive, driver.Shared} {
		o := open(t, ns, "c")
		cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		t0 := time.Now()
		_, err := o.Acquire(cctx, mode)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > time.Second {
			t.Fatalf("%s: cancelled Acquire: %v after %v", mode, err, time.Since(t0))
		}
	}
	// A reader holding and a writer cancelled while draining.
	if err := l.Release(ctx, w); err != nil {
		t.Fatal(err)
	}
	r, err := l.Acquire(ctx, driver.Shared)
	if err != nil {
		t.Fatal(err)
	}
	o := open(t, ns, "c")
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = o.Acquire(cctx, driver.Exclusive)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled drain: %v", err)
	}
	if err := l.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	in, err := Inspect(ns, "c")
	if err != nil || len(in.Holders) != 0 || in.Waiters != 0 || in.Detail != "state 0x0000000000000000" {
		t.Fatalf("after the cancellations: %+v, %v", in, err)
	}
}

// Remove fires the loss of the handles on the removed file; Inspect and
// Remove of a missing name report fs.ErrNotExist.
func TestRemove(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	l := open(t, ns, "x")
	g, err := l.Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	if ls, err := List(ns); err != nil || len(ls) != 1 || ls[0].Holders[0].Token != baton.Token(g.Token) {
		t.Fatalf("List: %+v, %v", ls, err)
	}
	if err := Remove(ns, "x"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.Loss.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("loss did not fire after Remove")
	}
	if err := l.Release(ctx, g); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("Release after Remove: %v", err)
	}
	if _, err := Inspect(ns, "x"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Inspect after Remove: %v", err)
	}
	if err := Remove(ns, "x"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Remove again: %v", err)
	}
}
