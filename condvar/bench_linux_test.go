//go:build linux

package condvar

import (
	"context"
	"sync"
	"testing"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
)

func BenchmarkSignalNoWaiter(b *testing.B) {
	ns, _ := ipc.OpenNamespace(b.TempDir())
	c := openCond(b, ns, "c")
	ctx := context.Background()
	for b.Loop() {
		if err := c.Signal(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSignalNoWaiterBackend(b *testing.B) {
	be, _ := openBackend(b.TempDir())
	defer be.Close()
	ctx := context.Background()
	c, err := be.Cond(ctx, "c")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := c.Signal(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSyncCondSignalNoWaiter(b *testing.B) {
	c := sync.NewCond(&sync.Mutex{})
	for b.Loop() {
		c.Signal()
	}
}

func BenchmarkSyncMutex(b *testing.B) {
	var mu sync.Mutex
	for b.Loop() {
		mu.Lock()
		mu.Unlock()
	}
}

// BenchmarkBackendMutex: Lock+Unlock of the futex mutex through the public
// API (baton.NewBackend).
func BenchmarkBackendMutex(b *testing.B) {
	be, _ := openBackend(b.TempDir())
	defer be.Close()
	ctx := context.Background()
	m, err := be.Mutex(ctx, "m")
	if err != nil {
		b.Fatal(err)
	}
	var h baton.Hold
	for b.Loop() {
		if h, err = m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	_ = h
}
