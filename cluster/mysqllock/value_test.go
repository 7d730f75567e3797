package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// TestValuePollerShared: waiters of one name on several handles of a
// Backend share one poller, which stops when the last of them leaves; a
// write by another Backend (seen only by polling) wakes them all.
func TestValuePollerShared(t *testing.T) {
	s := sharedServer(t)
	createDB(t, s, "baton")
	ctx := context.Background()
	db, err := sql.Open("mysql", "root@tcp("+s.addr()+")/baton")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	d, err := newBackend(ctx, db, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	b := baton.NewBackend(d)
	defer b.Close()
	other, err := OpenURL(ctx, s.url(testQuery))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	const name = "value/poller"
	w, err := other.Value(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	_, cur, err := w.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	polls := func() (names, waiters int) {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, p := range d.polls {
			waiters += p.waiters
		}
		return len(d.polls), waiters
	}
	const handles, goroutines = 3, 4
	var wg sync.WaitGroup
	woke := make(chan uint64, handles*goroutines)
	for range handles {
		v, err := b.Value(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				_, ver, err := v.Wait(wctx, cur)
				if err != nil {
					t.Error(err)
				}
				woke <- ver
			}()
		}
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if n, ws := polls(); n == 1 && ws == handles*goroutines {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%d pollers for %d waiters, want 1 for %d", n, ws, handles*goroutines)
		}
	}
	next, err := w.CompareAndSwap(ctx, cur, []byte("new"))
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(woke)
	for ver := range woke {
		if ver != next {
			t.Errorf("a waiter woke with version %d, want %d", ver, next)
		}
	}
	if n, ws := polls(); n != 0 || ws != 0 {
		t.Errorf("%d pollers with %d waiters left after every Wait returned", n, ws)
	}
	// A cancelled Wait leaves no poller either.
	v, err := b.Value(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	_, _, err = v.Wait(wctx, next)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait with no write: %v", err)
	}
	if n, _ := polls(); n != 0 {
		t.Errorf("%d pollers after a cancelled Wait", n)
	}
}

// TestValueContextEnds: a statement cut short by its context returns an
// error matching the context's, also when it was cut in the connection's
// dial, where the driver reports an i/o timeout instead (a listener whose
// backlog is full and that never accepts makes the dial hang).
func TestValueContextEnds(t *testing.T) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	for range 4 { // fill the backlog; later SYNs are dropped
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			break
		}
		defer c.Close()
	}
	db, err := sql.Open("mysql", "root@tcp("+addr+")/baton")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := &backend{db: db, t: tables{value: "`baton_value`"}, polls: map[string]*valuePoll{}}
	v := &value{b: b, name: "x"}
	for i, call := range []func(context.Context) error{
		func(ctx context.Context) error { _, _, err := v.Load(ctx); return err },
		func(ctx context.Context) error { _, err := v.CompareAndSwap(ctx, 0, nil); return err },
		func(ctx context.Context) error { _, err := v.CompareAndSwap(ctx, 3, nil); return err },
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := call(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("call %d, its context ended in the dial: %v, want DeadlineExceeded", i, err)
		}
	}
}
