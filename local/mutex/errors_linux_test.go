//go:build linux

package mutex_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

// TestLocalErrorsNameOnce: the core names the backend, the primitive and
// the name once; the same-host drivers (futex and flock mutexes, System V
// and flock RW locks, System V semaphore) return bare causes under it.
func TestLocalErrorsNameOnce(t *testing.T) {
	ctx := context.Background()
	const name = "refused-x"
	for _, tc := range []struct {
		what string
		opts []local.Option
		kind baton.Kind
	}{
		{"futex mutex", []local.Option{local.WithMutex(local.MutexFutex)}, baton.KindMutex},
		{"flock mutex", []local.Option{local.WithMutex(local.MutexFlock)}, baton.KindMutex},
		{"sysv rwmutex", []local.Option{local.WithRWMutex(local.RWSysV)}, baton.KindRWMutex},
		{"flock rwmutex", []local.Option{local.WithRWMutex(local.RWFlock)}, baton.KindRWMutex},
		{"semaphore", nil, baton.KindSemaphore},
	} {
		t.Run(tc.what, func(t *testing.T) {
			b, err := local.Open(t.TempDir(), tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			// Two handles: the second is refused by the driver, not by the
			// core's own bookkeeping of one handle.
			var try func() error
			switch tc.kind {
			case baton.KindMutex:
				m1, _ := b.Mutex(ctx, name)
				m2, err := b.Mutex(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := m1.Lock(ctx); err != nil {
					t.Fatal(err)
				}
				try = func() error { _, err := m2.TryLock(ctx); return err }
			case baton.KindRWMutex:
				m1, _ := b.RWMutex(ctx, name)
				m2, err := b.RWMutex(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := m1.Lock(ctx); err != nil {
					t.Fatal(err)
				}
				try = func() error { _, err := m2.TryRLock(ctx); return err }
			default:
				s1, _ := b.Semaphore(ctx, name, 1)
				s2, err := b.Semaphore(ctx, name, 1)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s1.Acquire(ctx, 1); err != nil {
					t.Fatal(err)
				}
				try = func() error { _, err := s2.TryAcquire(ctx, 1); return err }
			}
			err = try()
			if !errors.Is(err, baton.ErrLocked) {
				t.Fatalf("refused try = %v, want ErrLocked", err)
			}
			msg := err.Error()
			if n := strings.Count(msg, name); n != 1 {
				t.Errorf("%q names %q %d times, want once", msg, name, n)
			}
			for _, p := range []string{"futex mutex", "filelock", "rwlock", "sysv"} {
				if strings.Contains(msg, p) {
					t.Errorf("%q repeats the driver's %q", msg, p)
				}
			}
		})
	}
}
