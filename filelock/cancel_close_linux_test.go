package filelock

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/batonlock/baton/driver"
)

// TestCancelThenClose: a waiter whose context is cancelled returns, and its
// handle is closed (which unmaps the page) at once, many times over. The
// wake that the cancellation starts must not touch the page after the
// waiter returned: it did, and a run of the local suite died of SIGSEGV in
// that wake. The window is a goroutine's scheduling delay, so this hammer
// finds it only now and then.
func TestCancelThenClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	// A holder that takes and gives back the lock without pause keeps the
	// waiter waking and retrying, so that it often sees its cancellation
	// before the cancellation's own wake has run.
	holder := openMutex(t, path)
	stop := make(chan struct{})
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		for {
			select {
			case <-stop:
				return
			default:
			}
			g, err := holder.Acquire(context.Background(), driver.Exclusive)
			if err == nil {
				_ = holder.Release(context.Background(), g)
			}
		}
	}()
	defer func() { close(stop); <-churned }()
	for range 200 {
		m, err := OpenMutex(path)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			g, err := m.Acquire(ctx, driver.Exclusive)
			if err == nil { // got in between the holder's turns
				err = m.Release(context.Background(), g)
			}
			done <- err
		}()
		runtime.Gosched()
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire after cancel: %v", err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		runtime.GC() // unmaps the pages of unreachable handles too
	}
}
