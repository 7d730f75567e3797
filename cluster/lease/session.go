package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/batonlock/baton/driver"
)

// Session is one lease as its client sees it: the local deadline until
// which the lease can be trusted, the holds that live on it (their
// driver.Loss, each with a value K of the backend's: etcd keeps the key of
// the hold), and why it ended. Every lease backend keeps its leases in
// Sessions: one per hold (Keeper: Redis, Redlock, PostgreSQL, MySQL), or
// one for every hold of a Backend (etcd's lease, ZooKeeper's session).
//
// The deadline moves only on a confirmed renewal (Extend), by the Renewal
// loop when the session has one, or by its owner (ZooKeeper's heartbeats).
// Every tracked Loss carries the deadline (driver.Loss.SetDeadline), so a
// read of a hold compares it with the monotonic clock even when the timer
// that ends the session runs late. A session ends once: at its deadline,
// on a renewal that says the lease is gone, by End, or by Stop; End fires
// every tracked Loss exactly once, Stop takes their deadlines off.
type Session[K any] struct {
	cfg SessionConfig

	mu       sync.Mutex
	done     chan struct{}      // guarded by mu; closed when the session ends, made by Done
	err      error              // guarded by mu; why it ended, nil while it lasts
	dl       time.Time          // guarded by mu; local deadline of the lease
	losses   map[*driver.Loss]K // guarded by mu; nil once ended
	expire   *time.Timer        // guarded by mu; ends the session at dl
	next     *time.Timer        // guarded by mu; the next renewal (nil: no Renewal)
	inflight chan struct{}      // guarded by mu; closed when the renewal in flight returns
	cancel   context.CancelFunc // guarded by mu; ends the renewal in flight
	lastErr  error              // guarded by mu; error of the last failed renewal
}

// SessionConfig says how a Session logs, what it reports when its
// deadline passes, and how it renews its lease.
type SessionConfig struct {
	// Logger gets the Renewal loop's renewals (Debug), failures and the
	// loss of the lease (Warn); nil logs nothing.
	Logger *slog.Logger
	// Subject names the lease in the log messages ("lease", "etcd
	// lease"); Attr goes on every line (the lock's name, the lease's id).
	Subject string
	Attr    slog.Attr
	// TTL is logged with each renewal.
	TTL time.Duration
	// Expired is the cause the session ends with when its deadline
	// passes (ErrExpired when nil); the last renewal error is added.
	Expired error
	// Renewal renews the lease in the background; none (a nil Renew):
	// the owner extends the deadline itself.
	Renewal Renewal
}

// ErrExpired is the default cause of a session whose deadline passed
// before a renewal moved it.
var ErrExpired = errors.New("lease deadline passed before renewal succeeded")

// errStopped is the Err of a session ended by Stop.
var errStopped = errors.New("lease session stopped")

// NewSession starts a session whose lease can be trusted until dl (from
// time.Now: it must carry a monotonic reading), and its Renewal if c has
// one.
func NewSession[K any](dl time.Time, c SessionConfig) *Session[K] {
	s := new(Session[K])
	s.start(dl, c)
	return s
}

// start starts s, which is new (Keeper embeds its session).
func (s *Session[K]) start(dl time.Time, c SessionConfig) {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Expired == nil {
		c.Expired = ErrExpired
	}
	s.mu.Lock()
	s.cfg, s.dl, s.losses = c, dl, make(map[*driver.Loss]K, 1)
	s.expire = time.AfterFunc(time.Until(dl), s.check)
	if r := c.Renewal; r.Renew != nil {
		s.next = time.AfterFunc(max(0, time.Until(r.First)), s.tick)
	}
	s.mu.Unlock()
}

// Deadline returns the local deadline of the lease.
func (s *Session[K]) Deadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dl
}

// Done returns a channel closed when the session ends (by its timer at
// the deadline, a renewal, End or Stop; Err ends a session past its
// deadline on the spot).
func (s *Session[K]) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		// Made on demand: a Keeper's is never waited on.
		s.done = make(chan struct{})
		if s.err != nil {
			close(s.done)
		}
	}
	return s.done
}

// Err returns why the session ended, or nil while it lasts. A session
// whose deadline has passed has ended, even if its timer has not run yet.
func (s *Session[K]) Err() error {
	s.mu.Lock()
	err, dl := s.err, s.dl
	s.mu.Unlock()
	if err == nil && !time.Now().Before(dl) {
		s.expired()
		return s.Err()
	}
	return err
}

// Extend moves the deadline to dl, given by a renewal the server
// confirmed, if that is later, and gives it to every tracked Loss. A
// deadline that has passed is not moved, since the server may have let the
// lease go meanwhile: the session ends instead. It reports whether the
// session lasts.
func (s *Session[K]) Extend(dl time.Time) bool {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return false
	}
	if !time.Now().Before(s.dl) {
		s.mu.Unlock()
		s.expired()
		return false
	}
	if dl.After(s.dl) {
		s.setLocked(dl)
	}
	s.mu.Unlock()
	return true
}

// SetDeadline moves the deadline to dl, earlier or later, as long as the
// session lasts: for a lease the server shortened, and for tests that play
// late renewals.
func (s *Session[K]) SetDeadline(dl time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.setLocked(dl)
		s.expire.Reset(time.Until(dl))
	}
}

func (s *Session[K]) setLocked(dl time.Time) {
	s.dl = dl
	for l := range s.losses {
		l.SetDeadline(dl)
	}
}

// Track adds a hold's Loss, with the backend's value k, and gives it the
// deadline; the Loss fires at once, with the cause, if the session has
// ended.
func (s *Session[K]) Track(l *driver.Loss, k K) {
	s.mu.Lock()
	if err := s.err; err != nil {
		s.mu.Unlock()
		l.Fire(err)
		return
	}
	s.losses[l] = k
	l.SetDeadline(s.dl)
	s.mu.Unlock()
}

// Untrack takes l off the session and its deadline off l, for a hold
// given back: it is not reported lost later.
func (s *Session[K]) Untrack(l *driver.Loss) {
	s.mu.Lock()
	delete(s.losses, l)
	s.mu.Unlock()
	l.SetDeadline(time.Time{})
}

// Pass moves the tracking of a hold from Loss from to Loss to, for a hold
// passed to another handle. It reports false, changing nothing, when the
// session has ended, from is not tracked or has fired, or less than left
// (and nothing) remains before the deadline: renewals are late, and the
// hold goes back to the server rather than to another holder.
func (s *Session[K]) Pass(from, to *driver.Loss, left time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.losses[from]
	// FireIf fires a Loss under mu and leaves it tracked: a hold it fired
	// is not passed on, or its release would report success.
	if rest := time.Until(s.dl); s.err != nil || !ok || from.Err() != nil || rest <= 0 || rest < left {
		return false
	}
	delete(s.losses, from)
	s.losses[to] = k
	to.SetDeadline(s.dl)
	from.SetDeadline(time.Time{})
	return true
}

// FireIf fires, with cause, the tracked Losses whose value match accepts,
// and leaves them tracked; it holds the session's lock, so that a hold
// being passed is found under its new Loss or refuses to pass.
func (s *Session[K]) FireIf(match func(K) bool, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for l, k := range s.losses {
		if match(k) {
			l.Fire(cause)
		}
	}
}

// End ends the session with cause and fires every tracked Loss with it,
// once; it stops the renewals (a renewal in flight is cancelled: Wait
// waits for it). Only the first End or Stop has an effect.
func (s *Session[K]) End(cause error) {
	s.end(cause, false)
}

// end is End, which logs the loss when asked to.
func (s *Session[K]) end(cause error, log bool) {
	losses := s.finish(cause)
	if losses == nil {
		return
	}
	if log {
		s.warn(" lost", slog.Any("err", cause))
	}
	for l := range losses {
		l.Fire(cause)
	}
}

// Stop ends the session without firing its Losses: it takes the deadline
// off each (a Loss whose deadline had passed fires then), for holds given
// back. It waits until a renewal in flight has returned.
func (s *Session[K]) Stop() {
	if losses := s.finish(errStopped); losses != nil {
		for l := range losses {
			l.SetDeadline(time.Time{})
		}
	}
	s.Wait()
}

// Wait waits until a renewal in flight has returned.
func (s *Session[K]) Wait() {
	s.mu.Lock()
	w := s.inflight
	s.mu.Unlock()
	if w != nil {
		<-w
	}
}

// finish marks the session ended and returns the Losses it tracked, or
// nil when it had ended already.
func (s *Session[K]) finish(cause error) map[*driver.Loss]K {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil
	}
	s.err = cause
	losses := s.losses
	s.losses = nil
	s.expire.Stop()
	if s.next != nil {
		s.next.Stop()
	}
	if s.cancel != nil {
		// A renewal in flight may hang until its own deadline; end it.
		s.cancel()
	}
	if s.done != nil {
		close(s.done)
	}
	return losses
}

// check ends the session if its deadline has passed, else re-arms the
// timer (Extend moves the deadline without touching it).
func (s *Session[K]) check() {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	if left := time.Until(s.dl); left > 0 {
		s.expire.Reset(left)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.expired()
}

// expired ends the session whose deadline passed, with the configured
// cause and the last renewal error.
func (s *Session[K]) expired() {
	s.mu.Lock()
	cause := s.cfg.Expired
	if s.lastErr != nil {
		cause = fmt.Errorf("%w; last renewal error: %w", cause, s.lastErr)
	}
	s.mu.Unlock()
	// Only a session that renews itself reports its loss: an owner that
	// extends it logs what it knows.
	s.end(cause, s.cfg.Renewal.Renew != nil)
}

func (s *Session[K]) warn(what string, attrs ...slog.Attr) {
	s.log(slog.LevelWarn, what, attrs...)
}

func (s *Session[K]) log(level slog.Level, what string, attrs ...slog.Attr) {
	s.cfg.Logger.LogAttrs(context.Background(), level, "baton: "+s.cfg.Subject+what, append([]slog.Attr{s.cfg.Attr}, attrs...)...)
}
