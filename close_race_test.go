package baton

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton/driver"
)

// lateDriver grants after its caller's context is done (a grant may cross a
// cancellation) and releases slowly; it records a Release that overlaps or
// follows Close, which for a real driver touches closed or unmapped memory.
type lateDriver struct {
	entered chan struct{} // Acquire started
	proceed chan struct{} // let Acquire return its grant
	closed  atomic.Bool
	bad     atomic.Int32 // Release calls that overlapped or followed Close
}

func newLateDriver() *lateDriver {
	return &lateDriver{entered: make(chan struct{}, 1), proceed: make(chan struct{})}
}

func (d *lateDriver) acquire() (driver.Grant, error) {
	d.entered <- struct{}{}
	<-d.proceed
	return driver.Grant{Token: 1, Loss: driver.NewLoss(), N: 1}, nil
}

func (d *lateDriver) release() error {
	time.Sleep(30 * time.Millisecond)
	if d.closed.Load() {
		d.bad.Add(1)
	}
	return nil
}

func (d *lateDriver) Acquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	return d.acquire()
}
func (d *lateDriver) TryAcquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	return driver.Grant{}, ErrLocked
}
func (d *lateDriver) Release(ctx context.Context, g driver.Grant) error { return d.release() }
func (d *lateDriver) Downgrade(ctx context.Context, g driver.Grant) (driver.Grant, error) {
	return driver.Grant{}, ErrUnsupported
}
func (d *lateDriver) Close() error { d.closed.Store(true); return nil }

type lateSem struct{ *lateDriver }

func (s lateSem) Acquire(ctx context.Context, n int64) (driver.Grant, error) { return s.acquire() }
func (s lateSem) TryAcquire(ctx context.Context, n int64) (driver.Grant, error) {
	return driver.Grant{}, ErrLocked
}
func (s lateSem) Release(ctx context.Context, g driver.Grant, n int64) error { return s.release() }
func (s lateSem) Capacity() int64                                            { return 1 }

type lateBackend struct{ d *lateDriver }

func (b lateBackend) Kind() string                   { return "late" }
func (b lateBackend) ValidateName(name string) error { return nil }
func (b lateBackend) OpenMutex(ctx context.Context, name string) (driver.Lock, error) {
	return b.d, nil
}
func (b lateBackend) OpenRWMutex(ctx context.Context, name string) (driver.Lock, error) {
	return nil, ErrUnsupported
}
func (b lateBackend) OpenSemaphore(ctx context.Context, name string, permits int64) (driver.Semaphore, error) {
	return lateSem{b.d}, nil
}
func (b lateBackend) OpenCond(ctx context.Context, name string) (driver.Cond, error) {
	return nil, ErrUnsupported
}
func (b lateBackend) Close() error { return nil }

// Close while an acquisition is returning its grant: the core gives the
// grant back, and Close must not close the driver under that Release.
func TestCloseWaitsForLateGrantRelease(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"mutex", "semaphore"} {
		t.Run(kind, func(t *testing.T) {
			d := newLateDriver()
			be := NewBackend(lateBackend{d})
			defer be.Close()
			var lock func() error
			var closeH func() error
			if kind == "mutex" {
				m, err := be.Mutex(ctx, "m")
				if err != nil {
					t.Fatal(err)
				}
				lock = func() error { _, err := m.Lock(ctx); return err }
				closeH = m.Close
			} else {
				s, err := be.Semaphore(ctx, "s", 1)
				if err != nil {
					t.Fatal(err)
				}
				lock = func() error { _, err := s.Acquire(ctx, 1); return err }
				closeH = s.Close
			}
			locked := make(chan error, 1)
			go func() { locked <- lock() }()
			<-d.entered
			closed := make(chan error, 1)
			go func() { closed <- closeH() }()
			time.Sleep(20 * time.Millisecond) // Close is waiting for the acquisition
			close(d.proceed)
			if err := <-locked; !errors.Is(err, ErrClosed) {
				t.Errorf("Lock that got its grant during Close = %v, want ErrClosed", err)
			}
			if err := <-closed; err != nil {
				t.Fatal(err)
			}
			if n := d.bad.Load(); n != 0 {
				t.Fatalf("%d Release calls overlapped or followed the driver's Close", n)
			}
		})
	}
}
