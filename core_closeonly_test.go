package baton

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonlock/baton/driver"
)

// closeOnlyLock records whether Acquire's context was marked as ended by
// Close alone, and with block waits for that context to end.
type closeOnlyLock struct {
	errLock
	seen  chan bool
	block bool
}

func (d closeOnlyLock) Acquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	d.seen <- driver.CloseOnly(ctx)
	if d.block {
		<-ctx.Done()
		return driver.Grant{}, ctx.Err()
	}
	return driver.Grant{Token: 1}, nil
}

type closeOnlyBackend struct {
	errBackend
	d closeOnlyLock
}

// newCloseOnly returns a Backend of a closeOnlyLock and what it records.
func newCloseOnly(block bool) (Backend, chan bool) {
	b := &closeOnlyBackend{}
	b.d = closeOnlyLock{errLock: errLock{&b.errBackend}, seen: make(chan bool, 1), block: block}
	return NewBackend(b), b.d.seen
}

func (b *closeOnlyBackend) OpenMutex(ctx context.Context, name string) (driver.Lock, error) {
	return b.d, nil
}

// TestCloseOnly: the core marks Acquire's context when the caller's cannot
// end, not when it can, and Close still ends a marked wait.
func TestCloseOnly(t *testing.T) {
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want bool
	}{
		{"background", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }, true},
		{"cancellable", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, false},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Minute)
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := c.ctx()
			defer cancel()
			b, seen := newCloseOnly(false)
			defer b.Close()
			m, err := b.Mutex(ctx, "m")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if got := <-seen; got != c.want {
				t.Errorf("CloseOnly = %v, want %v", got, c.want)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("Close ends the wait", func(t *testing.T) {
		b, seen := newCloseOnly(true)
		defer b.Close()
		m, err := b.Mutex(context.Background(), "m")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := m.Lock(context.Background())
			done <- err
		}()
		if !<-seen {
			t.Error("a wait with no end of its own was not marked")
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, ErrClosed) {
				t.Errorf("Lock after Close = %v, want ErrClosed", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not end the wait")
		}
	})
}
