package baton_test

import (
	"context"
	"testing"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

// benchLocal opens a Backend on a fresh namespace directory.
func benchLocal(b *testing.B) baton.Backend {
	be, err := local.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = be.Close() })
	return be
}

// BenchmarkCoreUncontended is Lock+Unlock (RLock+RUnlock, Acquire+Release) of one handle of local's default
// primitives through the core, with no observer: the paths an observer
// must not slow down while it is unset.
func BenchmarkCoreUncontended(b *testing.B) {
	ctx := context.Background()
	b.Run("mutex", func(b *testing.B) {
		m, err := benchLocal(b).Mutex(ctx, "m")
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rwmutex-read", func(b *testing.B) {
		m, err := benchLocal(b).RWMutex(ctx, "rw")
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.RLock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := m.RUnlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("semaphore", func(b *testing.B) {
		s, err := benchLocal(b).Semaphore(ctx, "s", 4)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Acquire(ctx, 1); err != nil {
				b.Fatal(err)
			}
			if err := s.Release(ctx, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

type nopObserver struct{}

func (nopObserver) Observe(baton.Event) {}

// BenchmarkCoreObserved is the Mutex of BenchmarkCoreUncontended with an
// observer that does nothing: the price of the observed path itself.
func BenchmarkCoreObserved(b *testing.B) {
	ctx := context.Background()
	be := benchLocal(b)
	if err := baton.Observe(be, nopObserver{}); err != nil {
		b.Fatal(err)
	}
	m, err := be.Mutex(ctx, "m")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
