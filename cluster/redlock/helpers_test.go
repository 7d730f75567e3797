package redlock

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/cluster/internal/redistest"
	"github.com/batonlock/baton/locktest"
	"github.com/redis/go-redis/v9"
)

func openCfg(cfg string) (baton.Backend, error) { return OpenURL(context.Background(), cfg) }

var suiteRedlock = locktest.Suite{Name: "redlock", Open: openCfg, Caps: locktest.Caps{
	CrossProcess: true, KillBound: 6 * time.Second, Acquisitions: 200, Lease: true},
	// A node's token counter goes a TTL (testQuery's 2 s) after its last
	// write, the set of waiters 2 s after the last refusal; the race test's
	// names come back just as they go.
	Reclaim: &locktest.Reclaim{
		Residue: func(cfg string) (int, error) { return redistest.Residue(cfg, redisnode.DefaultPrefix) },
		After:   2 * time.Second,
	}}

func TestMain(m *testing.M) { locktest.Main(m, suiteRedlock) }

// Leases of 2 s keep the kill test short and survive a loaded -race run.
const testQuery = "ttl=2s"

// The raw floor: SET NX PX, then compare-and-delete in one EVAL.
var rawUnlock = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

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

func open(t *testing.T, url string) baton.Backend {
	t.Helper()
	b, err := OpenURL(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func mutex(t *testing.T, b baton.Backend, name string) baton.Mutex {
	t.Helper()
	m, err := b.Mutex(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func inspector(t *testing.T, url string) (baton.Backend, baton.Inspector) {
	t.Helper()
	b, err := OpenURL(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	in, ok := b.(baton.Inspector)
	if !ok {
		t.Fatalf("%T does not implement baton.Inspector", b)
	}
	return b, in
}

// eventually polls f until it returns nil or 5 s pass.
func eventually(t *testing.T, f func() error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func checkHolder(t *testing.T, h baton.Holder, ttl time.Duration) {
	t.Helper()
	host, _ := os.Hostname()
	if h.PID != os.Getpid() || h.Host != host {
		t.Errorf("holder pid %d host %q, want %d %q", h.PID, h.Host, os.Getpid(), host)
	}
	if h.TTL <= 0 || h.TTL > ttl {
		t.Errorf("holder TTL %v, want in (0, %v]", h.TTL, ttl)
	}
	if d := time.Since(h.Since); d < -time.Second || d > time.Minute {
		t.Errorf("holder since %v, %v ago", h.Since, d)
	}
}

// removeLoses removes the mutex name, which m holds with hold, through the
// Inspector: the holder learns of it at its next renewal, its Unlock
// reports the loss, and the name is gone.
func removeLoses(t *testing.T, in baton.Inspector, m baton.Mutex, hold baton.Hold, name string) {
	t.Helper()
	ctx := context.Background()
	if err := in.Remove(ctx, baton.KindMutex, name); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hold.Lost():
	case <-time.After(3 * time.Second):
		t.Fatal("the hold of a removed mutex was not lost")
	}
	if err := m.Unlock(ctx); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("Unlock after Remove: %v, want ErrLost", err)
	}
	if _, err := in.Inspect(ctx, baton.KindMutex, name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Inspect after Remove: %v, want fs.ErrNotExist", err)
	}
}
