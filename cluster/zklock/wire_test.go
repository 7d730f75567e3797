package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// TestResumeWithWatches: a client whose connection drops again and again
// while it has watches set and requests in flight resumes its session
// every time (no hold or waiter is lost) and sets its watches again (the
// waiter is granted once the holder lets go). Under the race detector it
// is also the test of wire.go: with the client library's own record of
// the last zxid, its read of it races with its receiving goroutine here.
func TestResumeWithWatches(t *testing.T) {
	a := standalone(t)
	// With credentials, the client sends them first on every connection
	// and waits for their replies.
	for _, user := range []string{"", "app:secret@"} {
		t.Run(map[string]string{"": "Plain", "app:secret@": "Digest"}[user], func(t *testing.T) {
			resumeWithWatches(t, a, user)
		})
	}
}

func resumeWithWatches(t *testing.T, a, user string) {
	p := startProxy(t, a)
	prefix := fmt.Sprintf("resume%d", time.Now().UnixNano())
	b := open(t, fmt.Sprintf("zk://%s%s/%s?ttl=10s", user, p.addr, prefix))
	direct := open(t, fmt.Sprintf("zk://%s%s/%s?ttl=10s", user, a, prefix))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// A hold through the proxy, and a waiter through it for a lock the
	// direct client holds: the waiter's watch is set on the holder's node.
	mutex := func(b baton.Backend, name string) baton.Mutex {
		m, err := b.Mutex(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	mine, theirs, waiter := mutex(b, "mine"), mutex(direct, "theirs"), mutex(b, "theirs")
	held, err := mine.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := theirs.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	granted := make(chan error, 1)
	go func() {
		_, err := waiter.Lock(ctx)
		granted <- err
	}()
	q, err := b.Queue(ctx, "load")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Put(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	// Requests queued at every reconnection, more than the client's
	// queue holds: its set-watches request waits behind them.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := q.Stats(ctx); err != nil && !errors.Is(err, context.Canceled) {
					time.Sleep(5 * time.Millisecond) // the connection is down
				}
			}
		})
	}
	for i := range 8 {
		time.Sleep(20 * time.Millisecond)
		p.heal() // drops every connection: the client reconnects and resumes
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if _, err := q.Stats(ctx); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("reconnection %d: the client did not reconnect", i)
			}
		}
	}
	close(stop)
	wg.Wait()
	if err := held.Err(); err != nil {
		t.Fatalf("the hold through the dropped connections: %v", err)
	}
	select {
	case err := <-granted:
		t.Fatalf("the waiter returned while the other client holds: %v", err)
	default:
	}
	if err := theirs.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-granted:
		if err != nil {
			t.Fatalf("the waiter: %v", err)
		}
		if err := waiter.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter was not granted: its watch was not set again")
	}
	if err := mine.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
