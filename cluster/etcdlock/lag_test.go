package etcdlock

import (
	"context"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// pinnedClient returns a client of one member only, closed with the test.
func pinnedClient(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// A hold whose watch is served by a member that has not applied the hold's
// own write yet (the client balances requests over the members, and a
// follower can be behind the one that answered) is first told of older
// events of its key: a handle reuses its key ids, so those include the
// previous hold's put and delete. They must not fire the loss. The test
// writes through the leader and watches through a follower that is paused
// (SIGSTOP) while a handle locks, unlocks and locks again, so that the
// follower resumes behind.
func testLaggingWatchMember(t *testing.T, c *cluster) {
	ctx := context.Background()
	lead := c.leader(t, c.client(t))
	f := -1
	for i, m := range c.members {
		if i != lead && m.cmd != nil {
			f = i
		}
	}
	if f < 0 {
		t.Fatal("no follower")
	}
	kc := pinnedClient(t, c.members[lead].url)
	wc := pinnedClient(t, c.members[f].url)
	kc.Watcher = clientv3.NewWatcher(wc)
	b := must(New(kc, lease.WithTTL(3*time.Second), lease.WithPrefix("lagging"))).get(t)
	t.Cleanup(func() { b.Close() })
	proc := c.members[f].cmd.Process
	defer proc.Signal(syscall.SIGCONT)
	for _, kind := range []string{"mutex", "rwmutex"} {
		var m baton.Mutex
		if kind == "mutex" {
			m = must(b.Mutex(ctx, "m")).get(t)
		} else {
			m = must(b.RWMutex(ctx, "rw")).get(t)
		}
		for round := range 3 {
			must(m.Lock(ctx)).get(t) // the first hold of the key id
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := proc.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			must(m.Lock(ctx)).get(t)
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			h := must(m.Lock(ctx)).get(t) // the same key id again
			time.Sleep(100 * time.Millisecond)
			if err := proc.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			// Let the follower catch up and serve the hold's watch.
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := wc.Get(wctx, "lagging/")
			cancel()
			if err != nil {
				t.Fatalf("follower: %v", err)
			}
			select {
			case <-h.Lost():
				t.Fatalf("%s round %d: hold lost after its watch met older events: %v", kind, round, h.Err())
			case <-time.After(300 * time.Millisecond):
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatalf("%s round %d: unlock: %v", kind, round, err)
			}
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
