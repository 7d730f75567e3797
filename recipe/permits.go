package recipe

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/batonlock/baton"
)

// MaxPermits is the largest capacity of a PermitSemaphore: its permits
// are one Value of at most baton.MaxValueSize bytes.
const MaxPermits = (baton.MaxValueSize - permitHeader) / permitSize

const (
	permitFormat = 1
	permitHeader = 4  // format, 0, capacity (2 bytes)
	permitSize   = 16 // id, expiry (Unix ns)
)

// Permit is one permit of a PermitSemaphore: its id, which any process of
// the name may Release or Extend, and the end of its lease.
type Permit struct {
	ID      string
	Expires time.Time
}

// PermitSemaphore is a counting semaphore whose permits have ids and
// leases of their own, shared by every process that opens its name: a
// permit can be released by id from another process than the one that
// took it, extended, and comes back by itself when its lease ends (its
// holder died, or forgot it).
//
// The permits are one Value (ids and expiry times), changed by
// CompareAndSwap; leases are the wall clock of the process that took or
// extended them, compared by the others with theirs, so clocks must agree
// to a small part of the leases. A waiting Acquire waits for the Value's
// notification, or for a timer to the earliest expiry: no polling.
type PermitSemaphore struct {
	name     string
	capacity int
	v        baton.Value
}

// NewPermitSemaphore opens the permit semaphore of name on b with capacity
// (1 to MaxPermits) permits; a name that exists with another capacity is
// refused with a *baton.MismatchError.
func NewPermitSemaphore(ctx context.Context, b baton.Backend, name string, capacity int) (*PermitSemaphore, error) {
	if capacity < 1 || capacity > MaxPermits {
		return nil, fmt.Errorf("recipe: permit semaphore %q: capacity %d, want 1 to %d: %w", name, capacity, MaxPermits, baton.ErrInvalidArgument)
	}
	v, err := b.Value(ctx, name)
	if err != nil {
		return nil, err
	}
	s := &PermitSemaphore{name: name, capacity: capacity, v: v}
	_, err = swapValue(ctx, v, func(data []byte) ([]byte, error) {
		if len(data) == 0 {
			return encodePermits(capacity, nil), nil
		}
		c, _, err := decodePermits(data)
		if err != nil {
			return nil, err
		}
		if c != capacity {
			return nil, &baton.MismatchError{Param: "capacity", Have: int64(c), Want: int64(capacity)}
		}
		return nil, nil
	})
	if err != nil {
		_ = v.Close()
		return nil, s.wrap("open", err)
	}
	return s, nil
}

func (s *PermitSemaphore) wrap(op string, err error) error {
	return fmt.Errorf("recipe: permit semaphore %q: %s: %w", s.name, op, err)
}

// Close closes the handle; the permits stay, until released or expired.
func (s *PermitSemaphore) Close() error { return s.v.Close() }

// TryAcquire takes a permit with a lease of d if one is free now, or
// returns an error matching baton.ErrLocked.
func (s *PermitSemaphore) TryAcquire(ctx context.Context, d time.Duration) (Permit, error) {
	if d <= 0 {
		return Permit{}, s.wrap("acquire", fmt.Errorf("lease %v: %w", d, baton.ErrInvalidArgument))
	}
	p, _, err := s.take(ctx, d)
	if err == nil && p.ID == "" {
		err = baton.ErrLocked
	}
	if err != nil {
		return Permit{}, s.wrap("acquire", err)
	}
	return p, nil
}

// Acquire takes a permit with a lease of d, waiting until one is released
// or expires, or ctx ends (then it has taken nothing).
func (s *PermitSemaphore) Acquire(ctx context.Context, d time.Duration) (Permit, error) {
	if d <= 0 {
		return Permit{}, s.wrap("acquire", fmt.Errorf("lease %v: %w", d, baton.ErrInvalidArgument))
	}
	for {
		p, w, err := s.take(ctx, d)
		if err != nil {
			return Permit{}, s.wrap("acquire", err)
		}
		if p.ID != "" {
			return p, nil
		}
		// Wait for a change of the permits, or the earliest expiry.
		wctx, cancel := context.WithDeadline(ctx, w.until)
		_, _, err = s.v.Wait(wctx, w.ver)
		cancel()
		if ctx.Err() != nil {
			return Permit{}, s.wrap("acquire", ctx.Err())
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return Permit{}, s.wrap("acquire", err)
		}
	}
}

// wait is what a refused take saw: the version, and the earliest expiry.
type wait struct {
	ver   uint64
	until time.Time
}

// take adds a permit if one is free, dropping the expired; it returns the
// zero Permit and what to wait for when none is.
func (s *PermitSemaphore) take(ctx context.Context, d time.Duration) (Permit, wait, error) {
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return Permit{}, wait{}, err
	}
	for {
		data, ver, err := s.v.Load(ctx)
		if err != nil {
			return Permit{}, wait{}, err
		}
		ps, err := s.live(data)
		if err != nil {
			return Permit{}, wait{}, err
		}
		now := time.Now()
		if len(ps) >= s.capacity {
			w := wait{ver: ver, until: ps[0].expires}
			for _, p := range ps {
				w.until = minTime(w.until, p.expires)
			}
			return Permit{}, w, nil
		}
		p := permit{id: binary.BigEndian.Uint64(id[:]), expires: now.Add(d)}
		if _, err = s.v.CompareAndSwap(ctx, ver, encodePermits(s.capacity, append(ps, p))); err == nil {
			return p.public(), wait{}, nil
		}
		if !errors.Is(err, baton.ErrConflict) {
			return Permit{}, wait{}, err
		}
	}
}

// Release gives the permit id back. A permit unknown (never taken, given
// back already, or expired and dropped) is an error matching
// baton.ErrNotHeld.
func (s *PermitSemaphore) Release(ctx context.Context, id string) error {
	return s.change(ctx, "release", id, func(*permit) bool { return false })
}

// Extend sets the lease of the permit id to end d from now, and returns
// the new end. A permit whose lease has ended is an error matching
// baton.ErrNotHeld, as for Release: it may have been taken again.
func (s *PermitSemaphore) Extend(ctx context.Context, id string, d time.Duration) (time.Time, error) {
	if d <= 0 {
		return time.Time{}, s.wrap("extend", fmt.Errorf("lease %v: %w", d, baton.ErrInvalidArgument))
	}
	var end time.Time
	err := s.change(ctx, "extend", id, func(p *permit) bool {
		end = time.Now().Add(d)
		p.expires = end
		return true
	})
	return end, err
}

// change applies f to the live permit id (keep false: remove it).
func (s *PermitSemaphore) change(ctx context.Context, op, id string, f func(*permit) bool) error {
	b, err := hex.DecodeString(id)
	if err != nil || len(b) != 8 {
		return s.wrap(op, fmt.Errorf("permit id %q: %w", id, baton.ErrInvalidArgument))
	}
	want := binary.BigEndian.Uint64(b)
	_, err = swapValue(ctx, s.v, func(data []byte) ([]byte, error) {
		ps, err := s.live(data)
		if err != nil {
			return nil, err
		}
		for i := range ps {
			if ps[i].id != want {
				continue
			}
			if f(&ps[i]) {
				return encodePermits(s.capacity, ps), nil
			}
			return encodePermits(s.capacity, append(ps[:i], ps[i+1:]...)), nil
		}
		return nil, fmt.Errorf("permit %s: %w", id, baton.ErrNotHeld)
	})
	if err != nil {
		return s.wrap(op, err)
	}
	return nil
}

// Permits returns the permits taken and not expired.
func (s *PermitSemaphore) Permits(ctx context.Context) ([]Permit, error) {
	data, _, err := s.v.Load(ctx)
	if err != nil {
		return nil, s.wrap("permits", err)
	}
	ps, err := s.live(data)
	if err != nil {
		return nil, s.wrap("permits", err)
	}
	out := make([]Permit, len(ps))
	for i, p := range ps {
		out[i] = p.public()
	}
	return out, nil
}

// live decodes the permits whose lease has not ended.
func (s *PermitSemaphore) live(data []byte) ([]permit, error) {
	if len(data) == 0 {
		return nil, nil
	}
	c, ps, err := decodePermits(data)
	if err != nil {
		return nil, err
	}
	if c != s.capacity {
		return nil, &baton.MismatchError{Param: "capacity", Have: int64(c), Want: int64(s.capacity)}
	}
	now := time.Now()
	live := ps[:0]
	for _, p := range ps {
		if p.expires.After(now) {
			live = append(live, p)
		}
	}
	return live, nil
}

type permit struct {
	id      uint64
	expires time.Time
}

func (p permit) public() Permit {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], p.id)
	return Permit{ID: hex.EncodeToString(b[:]), Expires: p.expires}
}

func encodePermits(capacity int, ps []permit) []byte {
	b := make([]byte, permitHeader, permitHeader+permitSize*len(ps))
	b[0] = permitFormat
	binary.BigEndian.PutUint16(b[2:], uint16(capacity))
	for _, p := range ps {
		b = binary.BigEndian.AppendUint64(b, p.id)
		b = binary.BigEndian.AppendUint64(b, uint64(p.expires.UnixNano()))
	}
	return b
}

func decodePermits(b []byte) (int, []permit, error) {
	if len(b) < permitHeader || b[0] != permitFormat || (len(b)-permitHeader)%permitSize != 0 {
		return 0, nil, fmt.Errorf("the value holds no permits: %w", baton.ErrMismatch)
	}
	ps := make([]permit, 0, (len(b)-permitHeader)/permitSize)
	for o := permitHeader; o < len(b); o += permitSize {
		ps = append(ps, permit{
			id:      binary.BigEndian.Uint64(b[o:]),
			expires: time.Unix(0, int64(binary.BigEndian.Uint64(b[o+8:]))),
		})
	}
	return int(binary.BigEndian.Uint16(b[2:])), ps, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
