package redislock

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// commandCalls reads INFO commandstats: calls per command, those run by
// scripts included.
func commandCalls(t *testing.T, c *redis.Client) map[string]int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	for _, l := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(l, "cmdstat_"), ":calls=")
		if !ok || name == l {
			continue
		}
		n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		calls[name] = n
	}
	return calls
}

// An uncontended Lock and Unlock cost the server one script each and, in
// them, six commands of which three write (a write costs a script more
// than a read): an MGET of the marker, the hold, the waiter sequence and
// the counter, TIME, the counter's SET with its expiry and the hold's SET;
// an MGET of the hold and the waiter sequence, and DEL. Nobody waits, so
// nothing is published and nobody subscribes.
func TestUncontendedCommands(t *testing.T) {
	s := startRedis(t)
	c := s.Client()
	m := mutex(t, open(t, s.URL("")), "commands")
	ctx := context.Background()
	cycle := func() {
		if _, err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cycle() // loads the scripts and subscribes
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const n = 10
	for range n {
		cycle()
	}
	calls := commandCalls(t, c)
	delete(calls, "info")
	delete(calls, "config|resetstat")
	want := map[string]int{"evalsha": 2 * n, "mget": 2 * n, "time": n, "set": 2 * n, "del": n}
	for k, v := range want {
		if calls[k] != v {
			t.Errorf("%s: %d calls in %d cycles, want %d", k, calls[k], n, v)
		}
	}
	for k, v := range calls {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: %d calls in %d cycles, want none", k, v, n)
		}
	}
}

// The queue's keys outlive every entry in them: a release that hands the
// lock on leaves their expiry as it was, which covers the waiters left,
// and arrivals extend it; they go once the last waiter is granted.
func TestQueueKeysOutliveEntries(t *testing.T) {
	s := startRedis(t)
	c := s.Client()
	url := s.URL("ttl=2s")
	ctx := context.Background()
	keys := mutexKeys(DefaultPrefix, "qkeys")
	holder := mutex(t, open(t, url), "qkeys")
	if _, err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	const waiters = 3
	granted := make(chan chan struct{}, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		m := mutex(t, open(t, url), "qkeys")
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.Lock(ctx); err != nil {
				t.Error(err)
				return
			}
			next := make(chan struct{})
			granted <- next
			<-next
			if err := m.Unlock(ctx); err != nil {
				t.Error(err)
			}
		}()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			if n, _ := c.ZCard(ctx, keys[3]).Result(); n == int64(i+1) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("waiter never queued")
			}
		}
	}
	// check fails t unless each queue key lasts at least a second past the
	// latest waiter entry's expiry.
	check := func(when string) {
		t.Helper()
		last, err := c.ZRangeWithScores(ctx, keys[3], -1, -1).Result()
		if err != nil || len(last) != 1 {
			t.Fatalf("%s: qexp %v %v", when, last, err)
		}
		tm, err := c.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		need := int64(last[0].Score) - tm.UnixMilli() + 1000
		for _, k := range keys[2:5] {
			if ttl, err := c.PTTL(ctx, k).Result(); err != nil || ttl.Milliseconds() < need-50 {
				t.Errorf("%s: %s expires in %v (%v), want at least %d ms", when, k, ttl, err, need)
			}
		}
	}
	check("queued")
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range waiters {
		next := <-granted
		if i < waiters-1 {
			check("after handoff " + strconv.Itoa(i))
		}
		close(next)
	}
	wg.Wait()
	if n, err := c.Exists(ctx, keys[2:5]...).Result(); err != nil || n != 0 {
		t.Errorf("%d queue keys left once every waiter was granted (%v)", n, err)
	}
}

// An uncontended Put, Claim and Ack cost the server one script each: a
// Claim that finds a job ready neither subscribes nor unsubscribes, a Put
// that no claimant waits for announces nothing, and the scripts' commands
// stay few (each costs a script about as much as a command sent alone).
func TestQueueUncontendedCommands(t *testing.T) {
	s := startRedis(t)
	c := s.Client()
	q := queue(t, open(t, s.URL("")), "commands")
	ctx := context.Background()
	cycle := func() {
		mustPut(t, q, "job")
		j, err := q.Claim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cycle() // loads the scripts
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const n = 10
	for range n {
		cycle()
	}
	calls := commandCalls(t, c)
	defer func() {
		if t.Failed() {
			t.Logf("calls: %v", calls)
		}
	}()
	if calls["evalsha"] != 3*n {
		t.Errorf("evalsha: %d calls in %d cycles, want %d", calls["evalsha"], n, 3*n)
	}
	for _, k := range []string{"subscribe", "unsubscribe", "ping", "publish"} {
		if calls[k] != 0 {
			t.Errorf("%s: %d calls in %d cycles, want none", k, calls[k], n)
		}
	}
	inner := -calls["evalsha"] - calls["config|resetstat"]
	for _, v := range calls {
		inner += v
	}
	// The ack script frees a job's key without reading its info (the claim
	// handed the key to the claimant) and reads no clock (it gives back no
	// lapsed claim); the claim pops its job in one command.
	if inner > 21*n {
		t.Errorf("%d commands in the scripts of %d cycles, want at most %d", inner, n, 21*n)
	}
}
