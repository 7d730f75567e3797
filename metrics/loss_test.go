package metrics_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	_ "github.com/batonlock/baton/cluster/redislock"
	"github.com/batonlock/baton/internal/servers"
	"github.com/batonlock/baton/metrics"
	"github.com/redis/go-redis/v9"
)

// lossLog records the EventLost events it sees.
type lossLog struct {
	mu   sync.Mutex
	seen []baton.Event
}

func (l *lossLog) Observe(e baton.Event) {
	if e.Type == baton.EventLost {
		l.mu.Lock()
		l.seen = append(l.seen, e)
		l.mu.Unlock()
	}
}

func (l *lossLog) events() []baton.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]baton.Event(nil), l.seen...)
}

// TestLossCountedWhenItFires: on Redis with a short lease, holds of a
// Mutex and of a Semaphore whose keys are removed behind their backs. The
// Collector counts each loss once as soon as the renewal finds the key
// gone, while the holder still has not called Unlock or Release; the
// release that follows (ErrLost) counts no second loss, and holds given
// back normally count none.
func TestLossCountedWhenItFires(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server not on PATH (CI): %v", err)
		}
		t.Skip("redis-server not on PATH")
	}
	u, stop, err := servers.Serve(servers.Redis)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	b, err := baton.Open(ctx, u+"?ttl=600ms")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := metrics.New()
	log := &lossLog{}
	if err := baton.Observe(b, baton.Observers(c, log)); err != nil {
		t.Fatal(err)
	}
	s := serve(t, c)
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opt)
	defer rc.Close()
	removeKeys := func(pattern string) {
		t.Helper()
		keys, err := rc.Keys(ctx, pattern).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == 0 {
			t.Fatalf("no key matches %q", pattern)
		}
		if err := rc.Del(ctx, keys...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	losses := func(prim, name string) float64 {
		v, _ := value(s.scrape(), "baton_losses_total", map[string]string{"backend": "redis", "primitive": prim, "name": name})
		return v
	}
	// waitLoss waits, bounded, for the hold's loss and for the counter.
	waitLoss := func(hd baton.Hold, prim, name string) {
		t.Helper()
		select {
		case <-hd.Lost():
		case <-time.After(10 * time.Second):
			t.Fatalf("%s %q: the hold was not lost after its key was removed", prim, name)
		}
		for end := time.Now().Add(5 * time.Second); losses(prim, name) != 1; {
			if time.Now().After(end) {
				t.Fatalf("%s %q: baton_losses_total %v before the release, want 1", prim, name, losses(prim, name))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	m, err := b.Mutex(ctx, "lossy")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for range 3 {
		if _, err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if v := losses("mutex", "lossy"); v != 0 {
		t.Fatalf("baton_losses_total %v after normal releases, want 0", v)
	}
	hd, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	removeKeys("*lossy*")
	waitLoss(hd, "mutex", "lossy")
	if err := m.Unlock(ctx); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("Unlock of the lost hold: %v, want ErrLost", err)
	}
	if v := losses("mutex", "lossy"); v != 1 {
		t.Errorf("baton_losses_total %v after the release, want 1", v)
	}

	sem, err := b.Semaphore(ctx, "lossy-sem", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer sem.Close()
	if _, err := sem.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := sem.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	shd, err := sem.Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	removeKeys("*lossy-sem*")
	waitLoss(shd, "semaphore", "lossy-sem")
	if err := sem.Release(ctx, 2); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("Release of the lost permits: %v, want ErrLost", err)
	}
	if v := losses("semaphore", "lossy-sem"); v != 1 {
		t.Errorf("semaphore baton_losses_total %v after the release, want 1", v)
	}

	ev := log.events()
	if len(ev) != 2 {
		t.Fatalf("%d EventLost, want 2: %+v", len(ev), ev)
	}
	for _, e := range ev {
		if e.Op != "hold" || !errors.Is(e.Err, baton.ErrLost) || e.Backend != "redis" {
			t.Errorf("EventLost %+v: want Op hold, an ErrLost, backend redis", e)
		}
	}
}

// TestLossHammer: goroutines on three handles of one Redis Mutex lock and
// unlock while another goroutine keeps removing the lock's keys, so that
// holds are lost at every point: held, being passed between handles, being
// given back. Every hold whose Unlock reports ErrLost is counted lost
// exactly once, and no other.
func TestLossHammer(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server not on PATH (CI): %v", err)
		}
		t.Skip("redis-server not on PATH")
	}
	u, stop, err := servers.Serve(servers.Redis)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	b, err := baton.Open(ctx, u+"?ttl=300ms")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	log := &lossLog{}
	if err := baton.Observe(b, log); err != nil {
		t.Fatal(err)
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opt)
	defer rc.Close()
	var ms [3]baton.Mutex
	for i := range ms {
		if ms[i], err = b.Mutex(ctx, "hammer"); err != nil {
			t.Fatal(err)
		}
		defer ms[i].Close()
	}
	done := make(chan struct{})
	var remover sync.WaitGroup
	remover.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(3 * time.Millisecond):
			}
			keys, err := rc.Keys(ctx, "*hammer*").Result()
			if err == nil && len(keys) > 0 {
				_ = rc.Del(ctx, keys...).Err()
			}
		}
	})
	var lost, held atomic.Int64
	var wg sync.WaitGroup
	for g := range 9 {
		wg.Go(func() {
			m := ms[g%3]
			for range 60 {
				lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := m.Lock(lctx)
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				held.Add(1)
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
				switch err := m.Unlock(ctx); {
				case errors.Is(err, baton.ErrLost):
					lost.Add(1)
				case err != nil:
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	remover.Wait()
	// A loss reported when it fired is in the log before its Unlock
	// returned; none can come after.
	if got := int64(len(log.events())); got != lost.Load() || lost.Load() == 0 {
		t.Errorf("%d EventLost for %d holds lost (of %d), want as many and some", got, lost.Load(), held.Load())
	}
	t.Logf("%d holds, %d lost", held.Load(), lost.Load())
}
