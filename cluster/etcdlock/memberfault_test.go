package etcdlock

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// Members killed and paused under waiters, on a cluster of its own (the
// members are killed and restarted).
func TestMemberFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("3-member cluster in -short")
	}
	c := startCluster(t, 3)
	t.Run("WatchMemberKilled", func(t *testing.T) { testWatchMemberDies(t, c, true) })
	t.Run("WatchMemberPaused", func(t *testing.T) { testWatchMemberDies(t, c, false) })
	t.Run("RenewPastPausedMember", func(t *testing.T) { testRenewPastPausedMember(t, c) })
	t.Run("KillUnderWaiters", func(t *testing.T) { testKillUnderWaiters(t, c) })
	t.Run("QueueLeaderKill", func(t *testing.T) { testQueueLeaderKill(t, c) })
}

// A holder whose client balances over every member keeps its hold while
// one member is paused: a renewal sent to that member is given up early
// enough to renew through another before the lease's deadline.
func testRenewPastPausedMember(t *testing.T, c *cluster) {
	ctx := context.Background()
	b, _ := fast(t, c, "renewpaused") // 2 s TTL, renewed every 200 ms, 5 s request timeout
	m := must(b.Mutex(ctx, "m")).get(t)
	h := must(m.Lock(ctx)).get(t)
	resume := c.pause(t, c.follower(t, c.leader(t, c.client(t))))
	time.Sleep(3 * time.Second) // renewals go to the paused member in turn
	resume()
	if err := h.Err(); err != nil {
		t.Fatalf("hold lost while one member of three was paused: %v", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A waiter whose watch is served by a member that dies (SIGKILL) or stops
// answering (SIGSTOP), while the rest of the cluster serves its reads and
// writes, is granted the lock when the holder lets go (and a Value's
// waiter sees the change): it does not wait on the dead watch until its
// context ends. The waiter's client watches
// through that one member only, so that its watch cannot move elsewhere
// by itself.
func testWatchMemberDies(t *testing.T, c *cluster, kill bool) {
	ctx := context.Background()
	prefix := "watchdies-" + map[bool]string{true: "kill", false: "pause"}[kill]
	lead := c.leader(t, c.client(t))
	f := c.follower(t, lead)
	// Reads, writes and renewals go to the other members.
	var eps []string
	for i, m := range c.members {
		if i != f {
			eps = append(eps, m.url)
		}
	}
	kc, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kc.Close() })
	kc.Watcher = clientv3.NewWatcher(pinnedClient(t, c.members[f].url))
	wb := must(New(kc, lease.WithTTL(3*time.Second), lease.WithRequestTimeout(time.Second), lease.WithPrefix(prefix),
		lease.WithLogger(slog.New(slog.DiscardHandler)))).get(t)
	t.Cleanup(func() { wb.Close() })
	o := must(buildOptions([]lease.Option{lease.WithTTL(2 * time.Second), lease.WithPrefix(prefix)})).get(t)
	hd := newBackend(pinnedClient(t, c.members[lead].url), false, o)
	hb := baton.NewBackend(hd)
	t.Cleanup(func() { hb.Close() })
	hm := must(hb.Mutex(ctx, "m")).get(t)
	must(hm.Lock(ctx)).get(t)
	hs := must(hb.Semaphore(ctx, "s", 1)).get(t)
	must(hs.Acquire(ctx, 1)).get(t)

	wm := must(wb.Mutex(ctx, "m")).get(t)
	ws := must(wb.Semaphore(ctx, "s", 1)).get(t)
	type outcome struct {
		what string
		err  error
		took time.Duration
	}
	wv := must(wb.Value(ctx, "v")).get(t)
	hv := must(hb.Value(ctx, "v")).get(t)
	_, ver, err := hv.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan outcome, 3)
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	go func() {
		_, err := wm.Lock(wctx)
		got <- outcome{"Lock", err, time.Since(start)}
	}()
	go func() {
		_, err := ws.Acquire(wctx, 1)
		got <- outcome{"Acquire", err, time.Since(start)}
	}()
	go func() {
		_, _, err := wv.Wait(wctx, ver)
		got <- outcome{"Value.Wait", err, time.Since(start)}
	}()
	// The waiters are queued and watching.
	for _, dir := range []string{hd.dir(baton.KindMutex, "m") + "q/", hd.dir(baton.KindSemaphore, "s") + "q/"} {
		for {
			n, err := keys(ctx, kc, dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(n) >= 2 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if kill {
		c.kill(f)
		defer c.restart(t, f)
	} else {
		defer c.pause(t, f)()
	}
	time.Sleep(200 * time.Millisecond)
	if err := hm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := hs.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := hv.CompareAndSwap(ctx, ver, []byte("changed")); err != nil {
		t.Fatal(err)
	}
	// The watch is found silent within two request timeouts of its last
	// word, then the waiter reads through the members that answer.
	for range 3 {
		o := <-got
		switch {
		case o.err != nil:
			t.Errorf("%s after the watch's member died: %v (after %v)", o.what, o.err, o.took)
		case o.took > 4*time.Second:
			t.Errorf("%s returned only %v after the waiter started", o.what, o.took)
		default:
			t.Logf("%s returned %v after the waiter started", o.what, o.took)
		}
	}
}

// pause stops member i with SIGSTOP until the returned func resumes it
// (also when the test ends).
func (c *cluster) pause(t *testing.T, i int) func() {
	t.Helper()
	p := c.members[i].cmd.Process
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	resume := func() { once.Do(func() { _ = p.Signal(syscall.SIGCONT) }) }
	t.Cleanup(resume)
	return resume
}

// follower returns a running member that does not lead.
func (c *cluster) follower(t *testing.T, lead int) int {
	t.Helper()
	for i, m := range c.members {
		if i != lead && m.cmd != nil {
			return i
		}
	}
	t.Fatal("no follower")
	return -1
}

// Workers of clients of every member contend for one Mutex while the
// leader is paused and killed, and then a follower is killed; each member
// comes back before the next fault. Every Lock must end with the lock or
// an error of its own well before its context ends: a waiter whose watch
// was served by a dead member must not wait on it.
func testKillUnderWaiters(t *testing.T, c *cluster) {
	const (
		workers = 6
		lockCtx = 15 * time.Second
	)
	ctx := context.Background()
	var (
		stuck, grants, errs atomic.Int64
		inside              atomic.Int32
		maxWait             atomic.Int64
		wg                  sync.WaitGroup
	)
	done := make(chan struct{})
	for w := range workers {
		b := must(OpenURL(ctx, c.url("killwait"), lease.WithLogger(slog.New(slog.DiscardHandler)))).get(t)
		t.Cleanup(func() { b.Close() })
		m := must(b.Mutex(ctx, "m")).get(t)
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				start := time.Now()
				lctx, cancel := context.WithTimeout(ctx, lockCtx)
				_, err := m.Lock(lctx)
				cancel()
				took := time.Since(start)
				if int64(took) > maxWait.Load() {
					maxWait.Store(int64(took))
				}
				if err != nil {
					if errors.Is(err, context.DeadlineExceeded) {
						stuck.Add(1)
						t.Errorf("worker %d: Lock waited its whole context: %v", w, err)
					}
					errs.Add(1)
					time.Sleep(20 * time.Millisecond)
					continue
				}
				grants.Add(1)
				if inside.Add(1) != 1 {
					t.Errorf("worker %d: overlapping holds", w)
				}
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				if err := m.Unlock(ctx); err != nil && !errors.Is(err, baton.ErrLost) {
					t.Logf("worker %d: unlock: %v", w, err)
				}
			}
		})
	}
	// granted waits until the workers have been granted n more times.
	granted := func(what string, n int64) {
		t.Helper()
		from := grants.Load()
		deadline := time.Now().Add(lockCtx)
		for grants.Load() < from+n {
			if time.Now().After(deadline) {
				t.Fatalf("after %s: %d grants in %v", what, grants.Load()-from, lockCtx)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	cl := c.client(t)
	for round := range 2 {
		granted("start", 20)
		l := c.leader(t, cl)
		t.Logf("round %d: pausing and killing the leader m%d", round, l)
		c.pause(t, l)
		time.Sleep(1500 * time.Millisecond)
		c.kill(l)
		granted("leader killed", 20)
		c.restart(t, l)
		granted("leader back", 20)
		f := c.follower(t, c.leader(t, cl))
		t.Logf("round %d: killing the follower m%d", round, f)
		c.kill(f)
		granted("follower killed", 20)
		time.Sleep(2 * time.Second)
		c.restart(t, f)
	}
	// A Lock still in flight ends within its context, and says if it
	// waited all of it.
	close(done)
	wg.Wait()
	t.Logf("%d grants, %d errors, longest Lock %v", grants.Load(), errs.Load(), time.Duration(maxWait.Load()))
}
