package baton

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton/driver"
)

// passServer is an in-memory lock server for the tests of the pass line:
// one lock per name held by a client (a Backend), a FIFO of waiting
// clients, and a counter that advances by 16 per acquisition so that the
// holder may pass the hold 15 times with tokens of its own, as the Redis
// backend does.
type passServer struct {
	mu    sync.Mutex
	names map[string]*srvLock // guarded by mu

	acquisitions atomic.Int64 // grants from the server
	releases     atomic.Int64 // releases on the server
	passes       atomic.Int64 // successful Pass calls
	refuse       atomic.Bool  // Pass reports false
	crowded      atomic.Int64 // Acquire calls that overlapped another of the same client and name
	inAcquire    sync.Map     // client+name -> *atomic.Int32
}

type srvLock struct {
	holder  *lease
	q       []chan *lease
	counter uint64
}

// lease is one acquisition on the server, which passes share.
type lease struct {
	client *passBackend
	name   string
	cur    *passHold // the hold that may release it
	lost   bool
}

// passHold is Grant.Data: one hold of a lease.
type passHold struct {
	l      *lease
	passes int
	loss   *driver.Loss
}

func newPassServer() *passServer { return &passServer{names: map[string]*srvLock{}} }

func (s *passServer) lock(name string) *srvLock {
	sl := s.names[name]
	if sl == nil {
		sl = &srvLock{}
		s.names[name] = sl
	}
	return sl
}

// grant makes l the holder of sl; s.mu is held.
func (s *passServer) grant(sl *srvLock, l *lease) driver.Grant {
	sl.holder = l
	sl.counter += 16
	s.acquisitions.Add(1)
	h := &passHold{l: l, loss: driver.NewLoss()}
	l.cur = h
	return driver.Grant{Token: sl.counter - 15, Loss: h.loss, Data: h}
}

// handOver gives sl to its next waiter, or frees it; s.mu is held.
func (s *passServer) handOver(sl *srvLock) {
	sl.holder = nil
	if len(sl.q) > 0 {
		ch := sl.q[0]
		sl.q = sl.q[1:]
		ch <- nil // the waiter takes it under s.mu
		// Mark as taken so that nobody else takes it before the waiter.
		sl.holder = &lease{}
	}
}

// lose ends the lease in force on name, as an expiry would: its current
// hold's Loss fires and the server gives the lock to the next client.
func (s *passServer) lose(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.lock(name)
	if sl.holder == nil || sl.holder.cur == nil {
		return false
	}
	sl.holder.lost = true
	sl.holder.cur.loss.Fire(errors.New("lease expired"))
	s.handOver(sl)
	return true
}

type passBackend struct {
	s      *passServer
	closed atomic.Bool
}

func (b *passBackend) Kind() string                   { return "pass" }
func (b *passBackend) ValidateName(name string) error { return nil }
func (b *passBackend) OpenMutex(ctx context.Context, name string) (driver.Lock, error) {
	return &passLock{b: b, s: b.s, name: name}, nil
}
func (b *passBackend) OpenRWMutex(ctx context.Context, name string) (driver.Lock, error) {
	return nil, ErrUnsupported
}
func (b *passBackend) OpenSemaphore(ctx context.Context, name string, permits int64) (driver.Semaphore, error) {
	return nil, ErrUnsupported
}
func (b *passBackend) OpenCond(ctx context.Context, name string) (driver.Cond, error) {
	return nil, ErrUnsupported
}
func (b *passBackend) Close() error { b.closed.Store(true); return nil }

// passLock is the driver of one handle.
type passLock struct {
	b      *passBackend
	s      *passServer
	name   string
	closed atomic.Bool
	used   atomic.Int32 // calls after Close
}

var _ driver.Passer = (*passLock)(nil)

func (d *passLock) check() {
	if d.closed.Load() {
		d.used.Add(1)
	}
}

func (d *passLock) Acquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	d.check()
	v, _ := d.s.inAcquire.LoadOrStore(fmt.Sprintf("%p/%s", d.b, d.name), new(atomic.Int32))
	n := v.(*atomic.Int32)
	if n.Add(1) > 1 {
		d.s.crowded.Add(1)
	}
	defer n.Add(-1)
	s := d.s
	s.mu.Lock()
	sl := s.lock(d.name)
	if sl.holder == nil {
		g := s.grant(sl, &lease{client: d.b, name: d.name})
		s.mu.Unlock()
		return g, nil
	}
	ch := make(chan *lease, 1)
	sl.q = append(sl.q, ch)
	s.mu.Unlock()
	select {
	case <-ch:
		s.mu.Lock()
		g := s.grant(sl, &lease{client: d.b, name: d.name})
		s.mu.Unlock()
		return g, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, c := range sl.q {
		if c == ch {
			sl.q = append(sl.q[:i], sl.q[i+1:]...)
			return driver.Grant{}, ctx.Err()
		}
	}
	<-ch // handed over as the context ended: hand it on
	s.handOver(sl)
	return driver.Grant{}, ctx.Err()
}

func (d *passLock) TryAcquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	d.check()
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.lock(d.name)
	if sl.holder != nil {
		return driver.Grant{}, ErrLocked
	}
	return s.grant(sl, &lease{client: d.b, name: d.name}), nil
}

func (d *passLock) Release(ctx context.Context, g driver.Grant) error {
	d.check()
	h, ok := g.Data.(*passHold)
	if !ok || h.l.name != d.name || h.l.client != d.b {
		return ErrInvalidArgument
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.lock(d.name)
	if h.l.lost || sl.holder != h.l || h.l.cur != h {
		return fmt.Errorf("%w: released a hold the server does not have", ErrLost)
	}
	s.releases.Add(1)
	s.handOver(sl)
	return nil
}

func (d *passLock) Pass(g driver.Grant) (driver.Grant, bool) {
	d.check()
	s := d.s
	h, ok := g.Data.(*passHold)
	if !ok || h.passes >= 15 || s.refuse.Load() {
		return driver.Grant{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.l.lost || h.l.cur != h {
		return driver.Grant{}, false
	}
	nh := &passHold{l: h.l, passes: h.passes + 1, loss: driver.NewLoss()}
	h.l.cur = nh
	s.passes.Add(1)
	return driver.Grant{Token: g.Token + 1, Loss: nh.loss, Data: nh}, true
}

func (d *passLock) Downgrade(ctx context.Context, g driver.Grant) (driver.Grant, error) {
	return driver.Grant{}, ErrUnsupported
}

func (d *passLock) Close() error { d.closed.Store(true); return nil }

// openPass opens a core Backend over s and n Mutex handles of name.
func openPass(t *testing.T, s *passServer, name string, n int) (Backend, []Mutex, []*passLock) {
	t.Helper()
	b := NewBackend(&passBackend{s: s})
	t.Cleanup(func() { b.Close() })
	var ms []Mutex
	var ds []*passLock
	for range n {
		m, err := b.Mutex(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
		ds = append(ds, m.(mutexHandle).h.d.(*passLock))
	}
	return b, ms, ds
}

// TestPassLine: 8 handles × 4 goroutines of one Backend and 2 handles of
// another hammer one name, some with contexts that end at random. Holds
// never overlap, tokens strictly increase, only one handle of a Backend is
// in the driver's Acquire at a time, most acquisitions are passes, and the
// other Backend is not starved.
func TestPassLine(t *testing.T) {
	s := newPassServer()
	_, ms, _ := openPass(t, s, "x", 8)
	_, other, _ := openPass(t, s, "x", 2)
	var (
		inside    atomic.Int32
		overlaps  atomic.Int32
		mu        sync.Mutex
		last      Token
		stale     int
		locks     [2]int
		cancelled atomic.Int32
		wg        sync.WaitGroup
	)
	stop := time.Now().Add(700 * time.Millisecond)
	run := func(m Mutex, side int) {
		defer wg.Done()
		for time.Now().Before(stop) {
			ctx, cancel := context.WithCancel(context.Background())
			if rand.IntN(8) == 0 {
				time.AfterFunc(time.Duration(rand.IntN(200))*time.Microsecond, cancel)
			}
			h, err := m.Lock(ctx)
			if err != nil {
				cancel()
				if !errors.Is(err, context.Canceled) {
					t.Error(err)
					return
				}
				cancelled.Add(1)
				continue
			}
			if inside.Add(1) != 1 {
				overlaps.Add(1)
			}
			mu.Lock()
			if h.Token() <= last {
				stale++
			}
			last = h.Token()
			locks[side]++
			mu.Unlock()
			if h.Err() != nil {
				t.Errorf("hold lost: %v", h.Err())
			}
			inside.Add(-1)
			if err := m.Unlock(ctx); err != nil {
				t.Error(err)
			}
			cancel()
		}
	}
	for _, m := range ms {
		for range 4 {
			wg.Add(1)
			go run(m, 0)
		}
	}
	for _, m := range other {
		wg.Add(1)
		go run(m, 1)
	}
	wg.Wait()
	if overlaps.Load() > 0 || stale > 0 {
		t.Errorf("%d overlapping holds, %d tokens not above the previous one", overlaps.Load(), stale)
	}
	if c := s.crowded.Load(); c > 0 {
		t.Errorf("%d Acquire calls of one Backend on one name overlapped another", c)
	}
	total := locks[0] + locks[1]
	t.Logf("%d locks (%d by the second Backend), %d from the server, %d passed, %d cancelled",
		total, locks[1], s.acquisitions.Load(), s.passes.Load(), cancelled.Load())
	if s.passes.Load() < int64(total)/2 {
		t.Errorf("%d of %d locks were passes, want most", s.passes.Load(), total)
	}
	if locks[1] < 10 {
		t.Errorf("the second Backend locked %d times: starved", locks[1])
	}
}

// TestPassBound: a hold older than passFor goes back to the server instead
// of being passed, and so does one the driver cannot pass (out of tokens).
func TestPassBound(t *testing.T) {
	s := newPassServer()
	_, ms, _ := openPass(t, s, "x", 2)
	ctx := context.Background()
	if _, err := ms[0].Lock(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := ms[1].Lock(ctx)
		got <- err
	}()
	waitFor(t, func() bool { return lineLen(ms[0]) == 1 })
	time.Sleep(passFor + time.Millisecond)
	if err := ms[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if p, a, r := s.passes.Load(), s.acquisitions.Load(), s.releases.Load(); p != 0 || a != 2 || r != 1 {
		t.Errorf("after a hold older than passFor: %d passes, %d acquisitions, %d releases; want 0, 2, 1", p, a, r)
	}
	if err := ms[1].Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// A driver that cannot pass: the hold goes back to the server and the
	// waiter gets the turn.
	s.refuse.Store(true)
	if _, err := ms[0].Lock(ctx); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := ms[1].Lock(ctx)
		got <- err
	}()
	waitFor(t, func() bool { return lineLen(ms[0]) == 1 })
	if err := ms[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if p, a, r := s.passes.Load(), s.acquisitions.Load(), s.releases.Load(); p != 0 || a != 4 || r != 3 {
		t.Errorf("after a refused pass: %d passes, %d acquisitions, %d releases; want 0, 4, 3", p, a, r)
	}
	if err := ms[1].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func lineLen(m Mutex) int {
	h := m.(mutexHandle).h
	h.mu().Lock()
	defer h.mu().Unlock()
	return h.line.q.len()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// TestPassClose: handles are closed while their goroutines wait in the line,
// are handed holds, or hold. Nobody uses a driver after its Close, holds
// never overlap, every Lock returns a hold or ErrClosed, and at the end
// the name is free on the server with no turn left taken.
func TestPassClose(t *testing.T) {
	s := newPassServer()
	b, ms, _ := openPass(t, s, "x", 3)
	type rec struct{ start, end time.Duration }
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		drivers []*passLock
		recs    []rec // holds that ended with a successful Unlock
	)
	epoch := time.Now()
	stop := time.Now().Add(600 * time.Millisecond)
	work := func(m Mutex, until time.Time) {
		defer wg.Done()
		ctx := context.Background()
		for time.Now().Before(until) {
			_, err := m.Lock(ctx)
			if errors.Is(err, ErrClosed) {
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			r := rec{start: time.Since(epoch)}
			r.end = time.Since(epoch)
			// A hold of a handle being closed may be given back by Close
			// before this Unlock, which then reports ErrClosed: such a hold
			// was cut short and is left out.
			err = m.Unlock(ctx)
			if err != nil && !errors.Is(err, ErrClosed) {
				t.Error(err)
			}
			if err == nil {
				mu.Lock()
				recs = append(recs, r)
				mu.Unlock()
			}
		}
	}
	for _, m := range ms {
		wg.Add(2)
		go work(m, stop)
		go work(m, stop)
	}
	for time.Now().Before(stop) {
		m, err := b.Mutex(context.Background(), "x")
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		drivers = append(drivers, m.(mutexHandle).h.d.(*passLock))
		mu.Unlock()
		wg.Add(3)
		for range 3 {
			go work(m, stop)
		}
		time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond)
		if err := m.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
	wg.Wait()
	slices.SortFunc(recs, func(a, b rec) int { return cmp.Compare(a.start, b.start) })
	overlaps := 0
	for i := 1; i < len(recs); i++ {
		if recs[i].start < recs[i-1].end {
			overlaps++
		}
	}
	if overlaps > 0 {
		t.Errorf("%d overlapping holds", overlaps)
	}
	for _, d := range drivers {
		if n := d.used.Load(); n > 0 {
			t.Fatalf("a driver was called %d times after its Close", n)
		}
	}
	for _, m := range ms {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	}
	m, err := b.Mutex(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryLock(context.Background()); err != nil {
		t.Errorf("TryLock after every handle closed: %v", err)
	}
	t.Logf("%d handles closed, %d holds, %d passes, %d acquisitions", len(drivers), len(recs), s.passes.Load(), s.acquisitions.Load())
}

// TestPassTryLock: TryLock on a handle of the line never waits for the
// turn: it fails at once while another handle waits in the driver, and
// while a hold is being passed.
func TestPassTryLock(t *testing.T) {
	s := newPassServer()
	_, ms, _ := openPass(t, s, "x", 3)
	_, other, _ := openPass(t, s, "x", 1)
	ctx := context.Background()
	if _, err := other[0].Lock(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { _, err := ms[0].Lock(ctx); got <- err }()
	waitFor(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.names["x"].q) == 1 // ms[0] waits on the server
	})
	t0 := time.Now()
	if _, err := ms[1].TryLock(ctx); !errors.Is(err, ErrLocked) {
		t.Errorf("TryLock while another handle waits on the server: %v, want ErrLocked", err)
	}
	if d := time.Since(t0); d > 100*time.Millisecond {
		t.Errorf("TryLock took %v", d)
	}
	if err := other[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if _, err := ms[2].TryLock(ctx); !errors.Is(err, ErrLocked) {
		t.Errorf("TryLock while another handle holds: %v, want ErrLocked", err)
	}
	if err := ms[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ms[2].TryLock(ctx); err != nil {
		t.Errorf("TryLock of a free name: %v", err)
	}
}

// TestPassLoss: a hold passed on carries a Loss of its own, which fires
// when the lease beneath is lost; the holder's Unlock then reports ErrLost
// and the next waiter gets the lock from the server.
func TestPassLoss(t *testing.T) {
	defer func(d time.Duration) { passFor = d }(passFor) // see TestObservePassAndLoss
	passFor = time.Minute
	s := newPassServer()
	_, ms, _ := openPass(t, s, "x", 2)
	ctx := context.Background()
	h0, err := ms[0].Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan Hold, 1)
	go func() {
		h, err := ms[1].Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- h
	}()
	waitFor(t, func() bool { return lineLen(ms[0]) == 1 })
	if err := ms[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	h1 := <-got
	if s.passes.Load() != 1 || h1.Token() != h0.Token()+1 {
		t.Fatalf("passes %d, tokens %d then %d: want a pass", s.passes.Load(), h0.Token(), h1.Token())
	}
	if !s.lose("x") {
		t.Fatal("nothing to lose")
	}
	if h0.Err() != nil {
		t.Errorf("the loss of a hold passed on fired the earlier hold's: %v", h0.Err())
	}
	if !errors.Is(h1.Err(), ErrLost) {
		t.Errorf("passed hold's Err after the lease was lost: %v", h1.Err())
	}
	go func() {
		h, err := ms[0].Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- h
	}()
	waitFor(t, func() bool { return lineLen(ms[0]) == 1 })
	if err := ms[1].Unlock(ctx); !errors.Is(err, ErrLost) {
		t.Errorf("Unlock of a lost hold: %v, want ErrLost", err)
	}
	h2 := <-got
	if h2.Token() <= h1.Token() || s.acquisitions.Load() != 2 {
		t.Errorf("after a loss: token %d (previous %d), %d acquisitions; want a new one from the server", h2.Token(), h1.Token(), s.acquisitions.Load())
	}
	if err := ms[0].Unlock(ctx); err != nil {
		t.Error(err)
	}
}

// TestPassReentrancy: an owner's holds on a handle of the line count as on
// any handle; the hold is passed only when the last of them is unlocked,
// and the receiver's owner is the receiver's.
func TestPassReentrancy(t *testing.T) {
	s := newPassServer()
	_, ms, _ := openPass(t, s, "x", 2)
	a, b := WithOwner(context.Background()), WithOwner(context.Background())
	h1, err := ms[0].Lock(a)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := ms[0].Lock(a)
	if err != nil || h2.Token() != h1.Token() {
		t.Fatalf("reentrant Lock: %v, token %d (outer %d)", err, h2.Token(), h1.Token())
	}
	got := make(chan error, 1)
	go func() { _, err := ms[1].Lock(b); got <- err }()
	waitFor(t, func() bool { return lineLen(ms[0]) == 1 })
	if err := ms[0].Unlock(a); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		t.Fatalf("the waiter got the lock (%v) while the owner still held it once", err)
	case <-time.After(20 * time.Millisecond):
	}
	if n := ms[0].(mutexHandle).holdCount(a); n != 1 {
		t.Errorf("hold count %d, want 1", n)
	}
	if err := ms[0].Unlock(a); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if err := ms[1].Unlock(a); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Unlock by another owner: %v, want ErrNotHeld", err)
	}
	if n := ms[1].(mutexHandle).holdCount(b); n != 1 {
		t.Errorf("receiver's hold count %d, want 1", n)
	}
	if err := ms[1].Unlock(b); err != nil {
		t.Error(err)
	}
}
