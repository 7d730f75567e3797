package local_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"golang.org/x/sys/unix"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

// shmDir returns a temporary directory on tmpfs, where the default
// namespace lives, removed after the benchmark.
func shmDir(b *testing.B) string {
	dir, err := os.MkdirTemp("/dev/shm", "baton-bench")
	if err != nil {
		return b.TempDir()
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func openMutex(b *testing.B, opts ...local.Option) baton.Mutex {
	be, err := local.Open(shmDir(b), opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Close() })
	m, err := be.Mutex(context.Background(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func BenchmarkUncontended(b *testing.B) {
	ctx := context.Background()
	b.Run("sync.Mutex", func(b *testing.B) {
		var mu sync.Mutex
		for b.Loop() {
			mu.Lock()
			mu.Unlock()
		}
	})
	// The floors of a lock word: taking and giving it back (two
	// compare-and-swaps, as sync.Mutex), and the same with a token drawn
	// by an atomic add between them, which is the least a lock that gives
	// fencing tokens does while its word has no room for the token.
	var word, fence atomic.Uint64
	b.Run("floor-cas-cas", func(b *testing.B) {
		for b.Loop() {
			if !word.CompareAndSwap(0, 1) || !word.CompareAndSwap(1, 0) {
				b.Fatal("the word was not free")
			}
		}
	})
	b.Run("floor-cas-add-cas", func(b *testing.B) {
		for b.Loop() {
			if !word.CompareAndSwap(0, 1) {
				b.Fatal("the word was not free")
			}
			fence.Add(1)
			if !word.CompareAndSwap(1, 0) {
				b.Fatal("the word was not held")
			}
		}
	})
	b.Run("raw-flock", func(b *testing.B) {
		fd, err := unix.Open(filepath.Join(shmDir(b), "f"), unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Close(fd)
		for b.Loop() {
			_ = unix.Flock(fd, unix.LOCK_EX)
			_ = unix.Flock(fd, unix.LOCK_UN)
		}
	})
	b.Run("gofrs-flock", func(b *testing.B) {
		fl := flock.New(filepath.Join(shmDir(b), "f"))
		for b.Loop() {
			if err := fl.Lock(); err != nil {
				b.Fatal(err)
			}
			_ = fl.Unlock()
		}
	})
	for _, impl := range []local.MutexImpl{local.MutexFlock, local.MutexFutex} {
		b.Run("baton-"+string(impl), func(b *testing.B) {
			m := openMutex(b, local.WithMutex(impl))
			for b.Loop() {
				if _, err := m.Lock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := m.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// A context that can be cancelled, as most callers' are: it has to be
	// asked whether it is done.
	b.Run("baton-futex-cancellable-ctx", func(b *testing.B) {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		m := openMutex(b, local.WithMutex(local.MutexFutex))
		for b.Loop() {
			if _, err := m.Lock(cctx); err != nil {
				b.Fatal(err)
			}
			if err := m.Unlock(cctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkHandoff measures the time from Unlock by a holder to Lock
// returning in a waiter on another handle (another file description: the
// same kernel path as between processes). Reports the median.
func BenchmarkHandoff(b *testing.B) {
	ctx := context.Background()
	for _, impl := range []local.MutexImpl{local.MutexFlock, local.MutexFutex} {
		b.Run("baton-"+string(impl), func(b *testing.B) {
			be, err := local.Open(shmDir(b), local.WithMutex(impl))
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			h1, _ := be.Mutex(ctx, "handoff")
			h2, _ := be.Mutex(ctx, "handoff")
			var lat []time.Duration
			for b.Loop() {
				if _, err := h1.Lock(ctx); err != nil {
					b.Fatal(err)
				}
				got := make(chan time.Time)
				go func() {
					if _, err := h2.Lock(ctx); err != nil {
						b.Error(err)
					}
					got <- time.Now()
				}()
				time.Sleep(200 * time.Microsecond) // let the waiter sleep
				t0 := time.Now()
				_ = h1.Unlock(ctx)
				lat = append(lat, (<-got).Sub(t0))
				_ = h2.Unlock(ctx)
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "µs-median")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "µs-max")
		})
	}
}

// BenchmarkCancel measures the time from cancelling a blocked Lock to its
// return.
func BenchmarkCancel(b *testing.B) {
	ctx := context.Background()
	for _, impl := range []local.MutexImpl{local.MutexFlock, local.MutexFutex} {
		b.Run("baton-"+string(impl), func(b *testing.B) {
			be, err := local.Open(shmDir(b), local.WithMutex(impl))
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			h1, _ := be.Mutex(ctx, "cancel")
			h2, _ := be.Mutex(ctx, "cancel")
			if _, err := h1.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			defer h1.Unlock(ctx)
			var lat []time.Duration
			for b.Loop() {
				cctx, cancel := context.WithCancel(ctx)
				got := make(chan time.Time)
				go func() {
					_, _ = h2.Lock(cctx)
					got <- time.Now()
				}()
				time.Sleep(300 * time.Microsecond)
				t0 := time.Now()
				cancel()
				lat = append(lat, (<-got).Sub(t0))
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "µs-median")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "µs-max")
		})
	}
}
