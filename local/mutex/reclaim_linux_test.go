//go:build linux

package mutex

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/internal/word"
)

// TestReclaimAtLastClose: the file of a free mutex goes with the last
// handle of the host; one still held stays (its holder, or a waiter that
// recovers it, needs it), and reopening it neither waits nor loses the
// hold. (The mapping outlives a closed handle until it is unreachable, and
// a mapping keeps its file's flock: Release must unlock it, or the next
// opener of the name in the host would wait on its own process.)
func TestReclaimAtLastClose(t *testing.T) {
	ns := testNS(t)
	ctx := context.Background()
	path := ns.Resolve(Kind, "r").Path()

	a, b := openM(t, ns, "r"), openM(t, ns, "r")
	g, err := a.Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAcquire(ctx, driver.Exclusive); err == nil {
		t.Fatal("two handles of one name both hold it")
	}
	a.Release(ctx, g)
	a.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("reclaimed while another handle is open: %v", err)
	}
	b.Close()
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("not reclaimed at the last close: %v", err)
	}

	held := openM(t, ns, "r")
	if _, err := held.Acquire(ctx, driver.Exclusive); err != nil {
		t.Fatal(err)
	}
	held.Close() // held still: the file stays
	done := make(chan error, 1)
	go func() {
		m, err := Open(ns, "r")
		if err == nil {
			_, err = m.TryAcquire(ctx, driver.Exclusive)
			m.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a hold of a closed handle was lost by the reclaim")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("opening a name whose last handle closed while held waits")
	}
	runtime.KeepAlive(held)
}

// TestRemoveKeepsTokens: a name removed (baton rm) while held counts on
// from the tokens it gave, as one reclaimed does.
func TestRemoveKeepsTokens(t *testing.T) {
	ns := testNS(t)
	ctx := context.Background()
	a := openM(t, ns, "rm")
	var last uint64
	for range 3 {
		g, err := a.Acquire(ctx, driver.Exclusive)
		if err != nil {
			t.Fatal(err)
		}
		last = g.Token
		a.Release(ctx, g)
	}
	if _, err := a.Acquire(ctx, driver.Exclusive); err != nil {
		t.Fatal(err)
	}
	if err := Remove(ns, "rm"); err != nil {
		t.Fatal(err)
	}
	b := openM(t, ns, "rm")
	g, err := b.Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	if g.Token <= last+1 {
		t.Fatalf("token %d after a removal, the removed file gave up to %d", g.Token, last+1)
	}
}

// TestReclaimKeepsTokens: a name reclaimed at its last close counts on from
// its last token, also past a round of the state's token bits: the floor
// gets the base and the bits, not the base alone.
func TestReclaimKeepsTokens(t *testing.T) {
	ns := testNS(t)
	ctx := context.Background()
	path := ns.Resolve(Kind, "rt").Path()
	a := openM(t, ns, "rt")
	var last uint64
	for range word.TokenRound + 44 {
		g, err := a.Acquire(ctx, driver.Exclusive)
		if err != nil {
			t.Fatal(err)
		}
		last = g.Token
		a.Release(ctx, g)
	}
	a.Close()
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("not reclaimed at the last close: %v", err)
	}
	b := openM(t, ns, "rt")
	g, err := b.Acquire(ctx, driver.Exclusive)
	if err != nil || g.Token != last+1 {
		t.Fatalf("after the reclaim: %+v %v, want token %d", g, err, last+1)
	}
	b.Release(ctx, g)
}
