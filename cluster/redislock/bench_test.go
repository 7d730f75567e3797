package redislock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// The raw floor: SET NX PX, then compare-and-delete in one EVAL.
var rawUnlock = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// rawCycle is one Lock+Unlock of the raw floor.
func rawCycle(b *testing.B, ctx context.Context, c *redis.Client) {
	v := redisnode.NewID()
	ok, err := c.SetNX(ctx, "raw", v, 10*time.Second).Result()
	if err != nil || !ok {
		b.Fatal(ok, err)
	}
	if err := rawUnlock.Run(ctx, c, []string{"raw"}, v).Err(); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkRawFloor(b *testing.B) {
	s := startRedis(b)
	c := s.Client()
	ctx := context.Background()
	defer serverCPU(b, c)()
	var lat []time.Duration
	for b.Loop() {
		t0 := time.Now()
		rawCycle(b, ctx, c)
		lat = append(lat, time.Since(t0))
	}
	reportP50(b, lat)
}

func benchBackend(b *testing.B, url string) baton.Backend {
	bk, err := OpenURL(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bk.Close() })
	return bk
}

// lockUnlock is one uncontended Lock+Unlock cycle of m.
func lockUnlock(b *testing.B, m baton.Mutex) {
	ctx := context.Background()
	if _, err := m.Lock(ctx); err != nil {
		b.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		b.Fatal(err)
	}
}

func lockUnlockLoop(b *testing.B, m baton.Mutex) []time.Duration {
	var lat []time.Duration
	for b.Loop() {
		t0 := time.Now()
		lockUnlock(b, m)
		lat = append(lat, time.Since(t0))
	}
	return lat
}

func reportP50(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

func BenchmarkUncontended(b *testing.B) {
	s := startRedis(b)
	bk := benchBackend(b, s.URL(""))
	m, err := bk.Mutex(context.Background(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	defer serverCPU(b, s.Client())()
	reportP50(b, lockUnlockLoop(b, m))
}

// serverCPU reports the CPU time the server spent per operation, from the
// start of the benchmark loop to the call of the returned function.
func serverCPU(b *testing.B, c *redis.Client) func() {
	read := func() float64 {
		info, err := c.Info(context.Background(), "cpu").Result()
		if err != nil {
			b.Fatal(err)
		}
		var sum float64
		for _, line := range strings.Split(info, "\r\n") {
			k, v, _ := strings.Cut(line, ":")
			if k == "used_cpu_sys" || k == "used_cpu_user" {
				f, _ := strconv.ParseFloat(v, 64)
				sum += f
			}
		}
		return sum
	}
	t0 := read()
	return func() {
		if b.N > 0 {
			b.ReportMetric((read()-t0)*1e6/float64(b.N), "server-cpu-µs/op")
		}
	}
}

// BenchmarkContended16: 16 goroutines, each with its own handle (as 16
// processes would), on one name. Reports acquisitions/s and the worst wait.
func BenchmarkContended16(b *testing.B) {
	s := startRedis(b)
	bk := benchBackend(b, s.URL(""))
	ctx := context.Background()
	var mu sync.Mutex
	var worst time.Duration
	start := time.Now()
	var wg sync.WaitGroup
	per := b.N/16 + 1
	for range 16 {
		m, err := bk.Mutex(ctx, "contended")
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				t0 := time.Now()
				if _, err := m.Lock(ctx); err != nil {
					b.Error(err)
					return
				}
				w := time.Since(t0)
				if err := m.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				worst = max(worst, w)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.ReportMetric(float64(per*16)/el.Seconds(), "acq/s")
	b.ReportMetric(float64(worst.Milliseconds()), "worst-wait-ms")
}

// BenchmarkClients16: 16 clients (a Backend each, as 16 processes would
// have) on one name, so that every acquisition is a handoff on the server.
// Reports acquisitions/s, the server's CPU per acquisition and the fairness
// (fewest over most acquisitions per client).
func BenchmarkClients16(b *testing.B) {
	s := startRedis(b)
	ctx := context.Background()
	var left atomic.Int64
	left.Store(int64(b.N))
	counts := make([]int, 16)
	var wg sync.WaitGroup
	ms := make([]baton.Mutex, 16)
	for i := range ms {
		m, err := benchBackend(b, s.URL("")).Mutex(ctx, "clients16")
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		ms[i] = m
	}
	stop := serverCPU(b, s.Client())
	start := time.Now()
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				if _, err := m.Lock(ctx); err != nil {
					b.Error(err)
					return
				}
				counts[i]++
				if err := m.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	stop()
	b.ReportMetric(float64(b.N)/el.Seconds(), "acq/s")
	b.ReportMetric(float64(slices.Min(counts))/float64(max(1, slices.Max(counts))), "fairness")
}

// BenchmarkHandoff: a holder in one client unlocks; a waiter queued in
// another client holds. Reports the median time from Unlock to held.
func BenchmarkHandoff(b *testing.B) {
	s := startRedis(b)
	ctx := context.Background()
	m1, _ := benchBackend(b, s.URL("")).Mutex(ctx, "handoff")
	m2, _ := benchBackend(b, s.URL("")).Mutex(ctx, "handoff")
	c := s.Client()
	keys := mutexKeys(DefaultPrefix, "handoff")
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
		for {
			if n, _ := c.ZCard(ctx, keys[3]).Result(); n == 1 {
				break
			}
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

// alternate runs the cycles in turn, in blocks of 64 of each, for the
// benchmark's loop, so that all meet the same load on a shared machine. It
// reports each cycle's median as "NAME-p50-µs" and returns the medians, or
// nil when a cycle never ran.
func alternate(b *testing.B, names []string, cycles ...func()) []time.Duration {
	lat := make([][]time.Duration, len(cycles))
	for i := 0; b.Loop(); i++ {
		k := i / 64 % len(cycles)
		t0 := time.Now()
		cycles[k]()
		lat[k] = append(lat[k], time.Since(t0))
	}
	p50 := make([]time.Duration, len(cycles))
	for k, l := range lat {
		if len(l) == 0 {
			return nil
		}
		slices.Sort(l)
		p50[k] = l[len(l)/2]
		b.ReportMetric(float64(p50[k].Microseconds()), names[k]+"-p50-µs")
	}
	return p50
}

// BenchmarkUncontendedVsFloor alternates blocks of raw-floor cycles and of
// Lock+Unlock on the same server, so that both meet the same load on a
// shared machine, and reports both medians and their ratio.
func BenchmarkUncontendedVsFloor(b *testing.B) {
	s := startRedis(b)
	c := s.Client()
	ctx := context.Background()
	m, err := benchBackend(b, s.URL("")).Mutex(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	p50 := alternate(b, []string{"floor", "baton"},
		func() { rawCycle(b, ctx, c) },
		func() { lockUnlock(b, m) })
	if p50 != nil {
		b.ReportMetric(float64(p50[1])/float64(p50[0]), "x-floor")
	}
}

// BenchmarkUncontendedReplicas: Lock+Unlock of one Mutex on a master with
// one replica on loopback, without WithReplicas (replicas=0: no WAIT) and
// with WithReplicas(1) (each grant waits for the replica's
// acknowledgement in the same round trip).
func BenchmarkUncontendedReplicas(b *testing.B) {
	s := startRedis(b)
	startReplica(b, s)
	for _, n := range []int{0, 1} {
		b.Run("replicas="+strconv.Itoa(n), func(b *testing.B) {
			q := ""
			if n > 0 {
				q = "replicas=" + strconv.Itoa(n)
			}
			m, err := benchBackend(b, s.URL(q)).Mutex(context.Background(), "bench-replicas")
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			defer serverCPU(b, s.Client())()
			reportP50(b, lockUnlockLoop(b, m))
		})
	}
}

// BenchmarkHandoffScripts runs, on the server alone, the scripts of 16
// clients taking turns on one name, one step at a time: the holder's
// release hands the lock to the first in line, then the holder queues
// again. It reports the server's time in the scripts per handoff and the
// commands they call (INFO commandstats), without any client's time or
// Pub/Sub delivery in it: the part of a handoff that the scripts decide.
func BenchmarkHandoffScripts(b *testing.B) {
	s := startRedis(b)
	c := s.Client()
	ctx := context.Background()
	keys := mutexKeys(DefaultPrefix, "steady", DefaultPrefix+"alive")
	ttl := (10 * time.Second).Milliseconds()
	ids := make([]string, 16)
	for i := range ids {
		ids[i] = fmt.Sprintf("client-%02d-%s", i, redisnode.NewID())
	}
	acquire := func(id string) {
		if err := scriptMutexAcquire.Run(ctx, c, keys, id, ttl, "1 host", time.Now().UnixMilli(), "nobody").Err(); err != nil {
			b.Fatal(err)
		}
	}
	for _, id := range ids {
		acquire(id)
	}
	holder := 0
	step := func() {
		if r, err := scriptMutexRelease.Run(ctx, c, keys, ids[holder]).Int64(); r != 1 || err != nil {
			b.Fatal(r, err)
		}
		acquire(ids[holder])
		holder = (holder + 1) % len(ids)
	}
	for range 100 {
		step()
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		step()
	}
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var inner, usec int
	for _, l := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(l, "cmdstat_"), ":calls=")
		if !ok || name == l || name == "config|resetstat" {
			continue
		}
		calls, rest, _ := strings.Cut(rest, ",usec=")
		us, _, _ := strings.Cut(rest, ",")
		n, _ := strconv.Atoi(calls)
		if name == "evalsha" {
			usec, _ = strconv.Atoi(us)
		} else {
			inner += n
		}
	}
	b.ReportMetric(float64(usec)/float64(b.N), "script-µs/handoff")
	b.ReportMetric(float64(inner)/float64(b.N), "commands/handoff")
}
