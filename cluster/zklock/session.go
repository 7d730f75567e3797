package zklock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// epoch is a stretch of one ZooKeeper session during which this backend can
// vouch for it: it began with a heartbeat answered on that session, and it
// lasts while heartbeats keep being answered in time. Every hold and every
// waiter belongs to the epoch in which its node was created. An epoch ends
// when the session changes (it expired and the client made a new one), when
// no heartbeat was answered before the deadline (the server may have
// expired the session), or when the backend closes; an ended epoch stays
// ended, and the next acquisition begins a new one.
type epoch struct {
	sid  int64                    // the session's id
	s    *lease.Session[struct{}] // the deadline and the holds' losses
	done <-chan struct{}          // s.Done(): closed when the epoch ends
}

var (
	errExpired  = errors.New("session expired")
	errDeadline = errors.New("session not confirmed by a heartbeat before it could expire")
	errChanged  = errors.New("session replaced by a new one")
)

// newEpoch begins an epoch of session sid trusted until dl. The backend's
// heartbeats extend it: it has no renewal of its own.
func newEpoch(sid int64, dl time.Time) *epoch {
	s := lease.NewSession[struct{}](dl, lease.SessionConfig{Expired: errDeadline})
	return &epoch{sid: sid, s: s, done: s.Done()}
}

// extend moves the deadline to dl, given by a heartbeat answered on the
// epoch's session. A deadline that has passed is not moved: the server may
// have expired the session meanwhile, and another client may hold.
func (e *epoch) extend(dl time.Time) { e.s.Extend(dl) }

// end ends the epoch with cause and fires the loss of every hold in it.
func (e *epoch) end(cause error) { e.s.End(cause) }

// ended returns why the epoch ended, or nil while it lasts. An epoch whose
// deadline has passed has ended, even if its timer has not run yet.
func (e *epoch) ended() error { return e.s.Err() }

// lostErr is the error of a waiter whose epoch ended, matching ErrLost (or
// ErrClosed when the backend closed).
func (e *epoch) lostErr() error {
	err := e.ended()
	if err == nil || errors.Is(err, baton.ErrClosed) {
		return err
	}
	return fmt.Errorf("%w: %w", baton.ErrLost, err)
}

// track gives a new hold's loss the epoch's deadline; the loss fires at
// once if the epoch has ended.
func (e *epoch) track(l *driver.Loss) { e.s.Track(l, struct{}{}) }

// pass moves the tracking of a hold from its loss from to the loss to, the
// hold's grant being passed (mutexDriver.Pass), when the epoch lasts at
// least left more. It reports false, changing nothing, when it does not or
// from is not a loss of the epoch's.
func (e *epoch) pass(from, to *driver.Loss, left time.Duration) bool {
	return e.s.Pass(from, to, left)
}

func (e *epoch) untrack(l *driver.Loss) { e.s.Untrack(l) }

// marginDivisor: a hold's loss deadline keeps a tenth of the session
// timeout in hand, on top of the drift margin, before the server can expire
// the session and grant the lock to another client. The drift margin alone
// covers clock rates; this covers a holder that learns of its deadline
// late (a paused process, a loaded machine) while the server's expiry and
// the next holder's handoff are quick.
const marginDivisor = 10

// margin is what a loss deadline keeps before the earliest expiry of the
// session: a tenth of the session timeout plus the drift margin.
func (b *backend) margin() time.Duration {
	return b.timeout()/marginDivisor + b.o.Drift
}

// heartbeat sends one request and, if it is answered on the session it was
// sent on, returns that session's id and the deadline it gives: the send
// time plus the session timeout less the margin. The server renews a
// session on every request it receives, after it was sent, so it cannot
// expire the session before the send time plus the session timeout.
func (b *backend) heartbeat() (int64, time.Time, error) {
	sid := b.c.SessionID()
	sent := time.Now()
	_, _, err := b.c.Exists("/")
	switch {
	case err != nil:
		return 0, time.Time{}, err
	case sid == 0 || b.c.SessionID() != sid:
		return 0, time.Time{}, errChanged
	}
	return sid, sent.Add(b.timeout() - b.margin()), nil
}

// timeout is the session timeout the deadlines are counted with: the TTL,
// or the timeout the server granted when that is shorter.
func (b *backend) timeout() time.Duration {
	t := b.o.TTL
	if n := b.negotiated.Load(); n > 0 && time.Duration(n) < t {
		t = time.Duration(n)
	}
	return t
}

// every is the heartbeat period. A server that granted less than the TTL
// is heard from as often, relative to its timeout, as the options ask.
func (b *backend) every() time.Duration {
	return min(b.o.RenewEvery, time.Duration(float64(b.timeout())*float64(b.o.RenewEvery)/float64(b.o.TTL)))
}

// heartbeats runs until the backend closes: one heartbeat every renewal
// period, which extends the current epoch or ends it when the session
// changed.
func (b *backend) heartbeats() {
	defer b.bg.Done()
	wait := b.every()
	for {
		select {
		case <-b.stop:
			return
		case <-time.After(wait):
		}
		wait = b.every()
		e := b.cur.Load()
		if e == nil || e.ended() != nil {
			continue
		}
		sid, dl, err := b.heartbeat()
		switch {
		case err == nil && sid == e.sid:
			e.extend(dl)
		case err == nil || errors.Is(err, errChanged) || errors.Is(err, zk.ErrSessionExpired):
			e.end(errChanged)
		default:
			// Not answered: try again soon; the epoch's timer ends it
			// if no heartbeat gets through before its deadline.
			wait = max(b.every()/8, 10*time.Millisecond)
		}
	}
}

// epoch returns the current epoch, beginning a new one with a heartbeat
// when there is none or the last one ended.
func (b *backend) epoch() (*epoch, error) {
	if e := b.cur.Load(); e != nil && e.ended() == nil {
		return e, nil
	}
	b.epochMu.Lock()
	defer b.epochMu.Unlock()
	if b.closed.Load() {
		return nil, baton.ErrClosed
	}
	if e := b.cur.Load(); e != nil && e.ended() == nil {
		return e, nil
	}
	// A heartbeat that waited long for a connection gives a deadline
	// that is near or past: such an epoch would end at once. An answer
	// in time leaves more than half of what a fresh heartbeat gives.
	var sid int64
	var dl time.Time
	for attempt := 0; ; attempt++ {
		var err error
		sid, dl, err = b.heartbeat()
		if err != nil && (attempt >= 2 || !errors.Is(err, errChanged)) {
			return nil, fmt.Errorf("confirm session: %w", err)
		}
		if err == nil && time.Until(dl) > (b.timeout()-b.margin())/2 {
			break
		}
		if attempt >= 2 {
			return nil, fmt.Errorf("confirm session: %w: heartbeats answered too late", zk.ErrConnectionClosed)
		}
	}
	e := newEpoch(sid, dl)
	b.cur.Store(e)
	return e, nil
}

// onEvent receives the session events of a connection the backend dialled.
// An expiry ends the epoch at once; a disconnection needs nothing: the
// deadline, counted from the last heartbeat, ends the epoch before the
// server could expire the session.
func (b *backend) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession || ev.State != zk.StateExpired {
		return
	}
	b.o.Logger.Warn("baton: zookeeper session expired; its holds are lost", "err", errExpired)
	if e := b.cur.Load(); e != nil {
		e.end(errExpired)
	}
}

// revive moves a waiter's node to a new epoch when its own ended only
// because no heartbeat was answered in time, the connection has its
// session again and a new heartbeat confirms it is the same session: the
// session never expired, so the node is still the waiter's. Otherwise it
// returns the ended epoch's loss: the session expired or could have, and
// the client cannot tell yet.
func (b *backend) revive(ctx context.Context, n *node) error {
	err := n.e.ended()
	if err == nil {
		return nil
	}
	if !errors.Is(err, errDeadline) || b.c.State() != zk.StateHasSession {
		return n.e.lostErr()
	}
	e, eerr := call(b, ctx, b.epoch)
	if eerr != nil || e.sid != n.e.sid {
		return n.e.lostErr()
	}
	n.e = e
	return nil
}
