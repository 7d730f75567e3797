package redlock

import (
	"context"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/cluster/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func BenchmarkRedlock3(b *testing.B) {
	for _, mode := range []string{"healthy", "paused", "killed"} {
		b.Run(mode, func(b *testing.B) {
			ss := []*redistest.Server{redistest.Start(b), redistest.Start(b), redistest.Start(b)}
			bk := benchBackend(b, redlockURL(ss, ""))
			m, err := bk.Mutex(context.Background(), "rl")
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			switch mode {
			case "paused":
				ss[2].Signal(syscall.SIGSTOP)
				defer ss[2].Signal(syscall.SIGCONT)
			case "killed":
				ss[2].Kill()
			}
			reportP50(b, lockUnlockLoop(b, m))
		})
	}
}

// BenchmarkRedlockFloor measures what asking several nodes in parallel
// costs on this machine with no lock logic at all: two rounds of a no-op
// script sent to 3 servers at once, each round ending at the 2nd or the 3rd
// reply, against two rounds on one server. Blocks of the three alternate,
// so that all meet the same load. It is the floor of BenchmarkRedlock3:
// where fanout-2of3/single is well above 1.5, so is any Redlock.
func BenchmarkRedlockFloor(b *testing.B) {
	ss := []*redistest.Server{redistest.Start(b), redistest.Start(b), redistest.Start(b)}
	var cs []*redis.Client
	for _, s := range ss {
		cs = append(cs, s.Client())
	}
	noop := redis.NewScript(`return 1`)
	ctx := context.Background()
	call := func(c *redis.Client) error { return noop.Run(ctx, c, []string{"x"}, "a").Err() }
	round := func(want int) {
		out := make(chan error, len(cs))
		for _, c := range cs {
			go func() { out <- call(c) }()
		}
		for range want {
			if err := <-out; err != nil {
				b.Error(err)
			}
		}
		// The rest finish on their own, beside the next round, as a
		// Redlock's slowest node does.
	}
	p50 := alternate(b, []string{"single", "fanout-2of3", "fanout-3of3"},
		func() {
			if err := call(cs[0]); err != nil {
				b.Fatal(err)
			}
			if err := call(cs[0]); err != nil {
				b.Fatal(err)
			}
		},
		func() { round(2); round(2) },
		func() { round(3); round(3) })
	if p50 != nil {
		b.ReportMetric(float64(p50[1])/float64(p50[0]), "x-single")
	}
}

// rawQuorum runs f on every client in parallel and returns how many said
// yes, reading replies only until a majority said yes or no longer can;
// the slower nodes finish in the background, as a Redlock's do.
func rawQuorum(cs []*redis.Client, f func(c *redis.Client) (bool, error)) int {
	out := make(chan bool, len(cs))
	for _, c := range cs {
		go func() {
			ok, err := f(c)
			out <- ok && err == nil
		}()
	}
	quorum := len(cs)/2 + 1
	yes, no := 0, 0
	for range cs {
		if <-out {
			yes++
		} else {
			no++
		}
		if yes >= quorum || no > len(cs)-quorum {
			break
		}
	}
	return yes
}

// BenchmarkRedlockVsRaw alternates blocks of a raw Redlock (SET NX PX and
// compare-and-delete sent to 3 nodes at once, each done at a majority) with
// blocks of baton's Redlock Lock+Unlock, on the same go-redis clients, and
// reports both medians and their ratio: the cost of baton's Redlock over
// the algorithm's bare commands on this machine.
func BenchmarkRedlockVsRaw(b *testing.B) {
	ss := []*redistest.Server{redistest.Start(b), redistest.Start(b), redistest.Start(b)}
	var cs []*redis.Client
	var ucs []redis.UniversalClient
	for _, s := range ss {
		c := s.Client()
		cs = append(cs, c)
		ucs = append(ucs, c)
	}
	bk, err := New(ucs)
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	ctx := context.Background()
	m, err := bk.Mutex(ctx, "rl")
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	cycle := 0
	p50 := alternate(b, []string{"raw", "baton"},
		func() {
			// A key per cycle: a slow node's late SET may land after its
			// compare-and-delete and stay until its TTL.
			cycle++
			key, v := "raw:"+strconv.Itoa(cycle), redisnode.NewID()
			if rawQuorum(cs, func(c *redis.Client) (bool, error) { return c.SetNX(ctx, key, v, 10*time.Second).Result() }) < 2 {
				b.Fatal("raw Redlock: no majority for the lock")
			}
			if rawQuorum(cs, func(c *redis.Client) (bool, error) {
				n, err := rawUnlock.Run(ctx, c, []string{key}, v).Int()
				return n == 1, err
			}) < 2 {
				b.Fatal("raw Redlock: no majority for the unlock")
			}
		},
		func() { lockUnlock(b, m) })
	if p50 != nil {
		b.ReportMetric(float64(p50[1])/float64(p50[0]), "x-raw")
	}
}

// BenchmarkRedlockHandoff: a holder in one Redlock Backend unlocks while a
// waiter in another is blocked in Lock; reports the time from the Unlock
// call to the waiter holding.
func BenchmarkRedlockHandoff(b *testing.B) {
	ss := []*redistest.Server{redistest.Start(b), redistest.Start(b), redistest.Start(b)}
	ctx := context.Background()
	m1, err := benchBackend(b, redlockURL(ss, "")).Mutex(ctx, "handoff")
	if err != nil {
		b.Fatal(err)
	}
	m2, err := benchBackend(b, redlockURL(ss, "")).Mutex(ctx, "handoff")
	if err != nil {
		b.Fatal(err)
	}
	var cs []*redis.Client
	for _, s := range ss {
		cs = append(cs, s.Client())
	}
	flag := redisnode.KeyBase(DefaultPrefix, keyKind, "handoff") + "waiting"
	// refused reports whether the waiter was refused on a majority of the
	// nodes (where it marked the name as awaited). A node where the
	// holder's request came late may have gone to the waiter instead.
	refused := func() bool {
		n := 0
		for _, c := range cs {
			n += int(c.Exists(ctx, flag).Val())
		}
		return n >= 2
	}
	var lat []time.Duration
	for b.Loop() {
		if _, err := m1.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		got := make(chan time.Time, 1)
		go func() {
			if _, err := m2.Lock(ctx); err != nil {
				b.Error(err)
			}
			got <- time.Now()
		}()
		for !refused() {
		}
		t0 := time.Now()
		if err := m1.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-got).Sub(t0))
		if err := m2.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "handoff-p50-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "handoff-max-µs")
}
