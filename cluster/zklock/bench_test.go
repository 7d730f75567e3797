package zklock

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/batonlock/baton"
)

// Benchmarks against the client library's own lock recipe (zk.NewLock),
// on the standalone test server: one goroutine locking and unlocking, and
// 16 goroutines with a handle (or a zk.Lock) each on one name. Both share
// one connection.

func benchBackend(b *testing.B) (baton.Backend, *zk.Conn) {
	addr := standalone(b)
	c := connect(b, []string{addr}, 10*time.Second)
	bk, err := New(c)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = bk.Close() })
	return bk, c
}

func BenchmarkUncontended(b *testing.B) {
	ctx := context.Background()
	b.Run("baton", func(b *testing.B) {
		bk, _ := benchBackend(b)
		m, err := bk.Mutex(ctx, fmt.Sprintf("bu-%d", time.Now().UnixNano()))
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		for b.Loop() {
			if _, err := m.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("zk.Lock", func(b *testing.B) {
		_, c := benchBackend(b)
		l := zk.NewLock(c, fmt.Sprintf("/zkbench/u-%d", time.Now().UnixNano()), zk.WorldACL(zk.PermAll))
		for b.Loop() {
			if err := l.Lock(); err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkContended16(b *testing.B) {
	const g = 16
	ctx := context.Background()
	run := func(b *testing.B, lock, unlock []func() error) {
		var wg sync.WaitGroup
		work := make(chan struct{}, b.N)
		for range b.N {
			work <- struct{}{}
		}
		close(work)
		b.ResetTimer()
		for i := range g {
			wg.Go(func() {
				for range work {
					if err := lock[i](); err != nil {
						b.Error(err)
						return
					}
					if err := unlock[i](); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	b.Run("baton", func(b *testing.B) {
		bk, _ := benchBackend(b)
		name := fmt.Sprintf("bc-%d", time.Now().UnixNano())
		var lock, unlock []func() error
		for range g {
			m, err := bk.Mutex(ctx, name)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			lock = append(lock, func() error { _, err := m.Lock(ctx); return err })
			unlock = append(unlock, func() error { return m.Unlock(ctx) })
		}
		run(b, lock, unlock)
	})
	b.Run("zk.Lock", func(b *testing.B) {
		_, c := benchBackend(b)
		path := fmt.Sprintf("/zkbench/c-%d", time.Now().UnixNano())
		var lock, unlock []func() error
		for range g {
			l := zk.NewLock(c, path, zk.WorldACL(zk.PermAll))
			lock = append(lock, l.Lock)
			unlock = append(unlock, l.Unlock)
		}
		run(b, lock, unlock)
	})
}
