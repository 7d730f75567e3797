package lease

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/batonlock/baton"
)

// Renewer renews a session's lease once, by requests that end by ctx's
// deadline (deadline is the lease's, the latest that ctx's can be), and
// returns the lease's new local deadline: the send time of
// the request the server answered, plus the TTL the server counts, less
// the drift margin. An error matching baton.ErrLost, or made by Gone, says
// that the server no longer holds the lease: the session ends at once.
// Any other error is retried until the deadline.
type Renewer func(ctx context.Context, deadline time.Time) (next time.Time, err error)

// Renewal is how a Session renews its lease in the background. It runs no
// goroutine between renewals: they run from a timer, so that a session
// around a short hold costs no scheduling.
type Renewal struct {
	Renew Renewer
	// First is when the first renewal is due (at once if it has passed);
	// the next are due Every after each answered one.
	First time.Time
	Every time.Duration
	// Timeout bounds one renewal, as the deadline does.
	Timeout time.Duration
	// RetryFloor: a failed renewal is retried after Every/8, and no
	// sooner than RetryFloor.
	RetryFloor time.Duration
}

// Gone marks cause as the server's word that the lease no longer exists,
// for a Renewer: the session ends with cause, as it is.
func Gone(cause error) error { return goneError{cause} }

type goneError struct{ error }

func (g goneError) Unwrap() error { return g.error }

// tick sends one renewal and schedules the next.
func (s *Session[K]) tick() {
	r := &s.cfg.Renewal
	s.mu.Lock()
	if s.err != nil || s.inflight != nil {
		s.mu.Unlock()
		return
	}
	// A renewal answered after the deadline is of no use.
	until, dl := s.dl, time.Now().Add(r.Timeout)
	if until.Before(dl) {
		dl = until
	}
	ctx, cancel := context.WithDeadline(context.Background(), dl)
	done := make(chan struct{})
	s.inflight, s.cancel = done, cancel
	s.mu.Unlock()

	dl, err := r.Renew(ctx, until)
	cancel()

	s.mu.Lock()
	s.inflight, s.cancel = nil, nil
	close(done)
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	var gone goneError
	switch {
	case err == nil:
		s.lastErr = nil
		s.mu.Unlock()
		s.log(slog.LevelDebug, " renewed", slog.Duration("ttl", s.cfg.TTL))
		if s.Extend(dl) {
			s.reschedule(r.Every)
		}
	case errors.As(err, &gone):
		s.mu.Unlock()
		s.end(gone.error, true)
	case errors.Is(err, baton.ErrLost):
		s.mu.Unlock()
		s.end(err, true)
	default:
		s.lastErr = err
		left := time.Until(s.dl)
		// Retry sooner than the period: the deadline is closer now.
		s.next.Reset(max(r.Every/8, r.RetryFloor))
		s.mu.Unlock()
		s.warn(" renewal failed; retrying", slog.Any("err", err), slog.Duration("deadline_in", left))
	}
}

// reschedule sets the next renewal d from now, unless the session ended.
func (s *Session[K]) reschedule(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.next.Reset(d)
	}
}
