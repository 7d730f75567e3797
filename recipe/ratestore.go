package recipe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// rateState is a limit's stored state: its parameters and the theoretical
// arrival time (Unix ns) after the events taken so far.
type rateState struct {
	lim Limit
	tat int64
}

const rateFormat = 1

// encode is the Value's data: a format byte, rate, period, burst, tat.
func (s rateState) encode() []byte {
	b := make([]byte, 1, 33)
	b[0] = rateFormat
	for _, x := range []int64{s.lim.Rate, int64(s.lim.Period), s.lim.Burst, s.tat} {
		b = binary.BigEndian.AppendUint64(b, uint64(x))
	}
	return b
}

func decodeRate(b []byte) (rateState, error) {
	if len(b) != 33 || b[0] != rateFormat {
		return rateState{}, fmt.Errorf("%w: the value holds no rate limit", baton.ErrMismatch)
	}
	x := func(i int) int64 { return int64(binary.BigEndian.Uint64(b[1+8*i:])) }
	return rateState{lim: Limit{Rate: x(0), Period: time.Duration(x(1)), Burst: x(2)}, tat: x(3)}, nil
}

// gcraStep is one step of the generic cell rate algorithm on st (exists:
// the limit was stored before) at the time now, all times in Unix ns. It
// returns the state to store, or nil when nothing changes.
func gcraStep(st rateState, exists bool, op RateOp, lim Limit, n, at, now int64) (*rateState, RateOutcome, error) {
	o := RateOutcome{Now: time.Unix(0, now)}
	if exists && op != RateSet && st.lim != lim {
		return nil, o, RateMismatch(st.lim, lim)
	}
	var next *rateState
	t := int64(lim.Interval())
	tau := t * lim.Burst
	tat := max(st.tat, now)
	switch op {
	case RateAllow:
		if n == 0 {
			if !exists {
				next = &rateState{lim: lim}
			}
			break
		}
		newTat := tat + n*t
		if allowAt := newTat - tau; allowAt > now {
			o.Wait = time.Duration(allowAt - now)
			break
		}
		o.Allowed = true
		next = &rateState{lim: lim, tat: newTat}
	case RateReserve:
		newTat := tat + n*t
		o.Wait = time.Duration(max(0, newTat-tau-now))
		next = &rateState{lim: lim, tat: newTat}
	case RateCancel:
		if at > now && st.tat > now {
			next = &rateState{lim: lim, tat: max(now, st.tat-n*t)}
		}
	case RateSet:
		next = &rateState{lim: lim, tat: st.tat}
	}
	if next != nil {
		tat = max(next.tat, now)
	}
	o.Remaining = max(0, (now+tau-tat)/t)
	return next, o, nil
}

// valueRateStore keeps a limit in a baton.Value, each step one
// CompareAndSwap of the version, on the local clock. The data and version
// of its last step are kept, so that a step of an uncontended limit is one
// round trip; a refusal is decided on freshly loaded data only.
type valueRateStore struct {
	v baton.Value

	mu    sync.Mutex
	known bool // guarded by mu, with data and ver
	data  []byte
	ver   uint64
}

func (s *valueRateStore) Close() error { return s.v.Close() }

func (s *valueRateStore) Step(ctx context.Context, op RateOp, lim Limit, n int64, at time.Time) (RateOutcome, error) {
	var atNs int64
	if !at.IsZero() {
		atNs = at.UnixNano()
	}
	s.mu.Lock()
	known, data, ver := s.known, s.data, s.ver
	s.mu.Unlock()
	fresh := false
	for {
		if !known {
			var err error
			if data, ver, err = s.v.Load(ctx); err != nil {
				return RateOutcome{}, err
			}
			known, fresh = true, true
		}
		var st rateState
		if ver != 0 {
			var err error
			if st, err = decodeRate(data); err != nil {
				return RateOutcome{}, err
			}
		}
		next, o, err := gcraStep(st, ver != 0, op, lim, n, atNs, time.Now().UnixNano())
		if (err != nil || next == nil) && !fresh {
			known = false // refused on remembered data: decide on the stored
			continue
		}
		if err != nil || next == nil {
			return o, err
		}
		out := next.encode()
		nv, err := s.v.CompareAndSwap(ctx, ver, out)
		if err == nil {
			s.mu.Lock()
			s.known, s.data, s.ver = true, out, nv
			s.mu.Unlock()
			return o, nil
		}
		if !errors.Is(err, baton.ErrConflict) {
			return RateOutcome{}, err
		}
		known, fresh = false, false
	}
}

// driverRateStore is a backend's own store of a limit (driver.RateOpener).
type driverRateStore struct{ d driver.Rate }

func (s driverRateStore) Close() error { return s.d.Close() }

func (s driverRateStore) Step(ctx context.Context, op RateOp, lim Limit, n int64, at time.Time) (RateOutcome, error) {
	o, err := s.d.Step(ctx, driver.RateOp(op), driverLimit(lim), n, at)
	return RateOutcome(o), err
}

// driverLimit is lim in the driver's types.
func driverLimit(lim Limit) driver.RateLimit {
	return driver.RateLimit{Rate: lim.Rate, Period: lim.Period, Burst: lim.Burst, Interval: lim.Interval()}
}

// DriverRate is s in the driver's types: a backend's driver serves its
// RateStore to NewRateLimiter with it (driver.RateOpener).
func DriverRate(s RateStore) driver.Rate { return storeRate{s} }

// storeRate is a RateStore in the driver's types.
type storeRate struct{ s RateStore }

func (r storeRate) Close() error { return r.s.Close() }

func (r storeRate) Step(ctx context.Context, op driver.RateOp, lim driver.RateLimit, n int64, at time.Time) (driver.RateOutcome, error) {
	o, err := r.s.Step(ctx, RateOp(op), Limit{Rate: lim.Rate, Period: lim.Period, Burst: lim.Burst}, n, at)
	return driver.RateOutcome(o), err
}
