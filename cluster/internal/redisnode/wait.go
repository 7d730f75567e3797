package redisnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// ErrRestartWait is matched by the error of an acquisition that a server
// refused because it started empty (restarted without its data, or new),
// and leases it may have given before the restart can still run: no grant
// until it has run for a TTL. It is not baton.ErrLocked: nobody need hold
// the lock.
var ErrRestartWait = errors.New("the server started empty and may have lost grants")

// Doc is where the restart-safety wait is explained to a user.
const Doc = `see "A Redis server that started empty" in the README`

// RestartWaitError is the error of a try-lock refused during the
// restart-safety wait (ErrRestartWait), and the cause that a blocking
// acquisition whose context ended during the wait adds to the context's
// error.
type RestartWaitError struct {
	Addr string        // the server; "" when not known
	Left time.Duration // how much longer it refuses grants, at most
}

func (e *RestartWaitError) Error() string {
	return fmt.Sprintf("%s for another %v; %s", e.what(), e.Left, Doc)
}

func (e *RestartWaitError) what() string {
	if e.Addr == "" {
		return ErrRestartWait.Error()
	}
	if strings.Contains(e.Addr, ",") {
		return "the servers " + e.Addr + " started empty and may have lost grants"
	}
	return "the server " + e.Addr + " started empty and may have lost grants"
}

func (e *RestartWaitError) Unwrap() error { return ErrRestartWait }

// Notice is the text of the log record of a blocking acquisition that
// starts the restart-safety wait.
func (e *RestartWaitError) Notice() string {
	return fmt.Sprintf("waiting up to %v: %s; %s", e.Left, e.what(), Doc)
}

// Notices logs the notice of a blocking acquisition's restart-safety
// wait, once per wait however many acquisitions of the backend it holds
// up. Its zero value is ready to use.
type Notices struct {
	mu    sync.Mutex
	until time.Time // guarded by mu: the end of the wait last told
}

// Tell logs e at Warn on l unless a notice already told of a wait that
// ends no sooner.
func (n *Notices) Tell(l *slog.Logger, e *RestartWaitError) {
	end := time.Now().Add(e.Left)
	n.mu.Lock()
	told := !end.After(n.until.Add(time.Second))
	if !told {
		n.until = end
	}
	n.mu.Unlock()
	if !told {
		l.Warn(e.Notice(), "err", e)
	}
}

// CtxErr is the error of a blocking acquisition whose context ended: the
// context's error, with the restart-safety wait it was in, if any, as a
// second cause (so that it matches both).
func CtxErr(ctx context.Context, wait *RestartWaitError) error {
	if wait == nil {
		return ctx.Err()
	}
	return fmt.Errorf("%w: %w", ctx.Err(), wait)
}

// runIDKey holds the run ids of WithRunID.
var runIDKey = lease.NewKey[[]string]("redis run id")

// ParamRunID is the URL parameter of WithRunID: run ids separated by
// commas.
const ParamRunID = "run_id"

// WithRunID is the option of the backends' WithRunID: servers whose run id
// is one of ids need no restart-safety wait.
func WithRunID(ids ...string) lease.Option {
	for _, id := range ids {
		if len(id) != 40 || strings.Trim(id, "0123456789abcdef") != "" {
			return lease.Refuse(fmt.Errorf("%w: redis run id %q: 40 lower-case hex digits (INFO server: run_id)", baton.ErrInvalidArgument, id))
		}
	}
	if len(ids) == 0 {
		return lease.Refuse(fmt.Errorf("%w: redis run id: none given", baton.ErrInvalidArgument))
	}
	return runIDKey.Option(slices.Clone(ids))
}

// RunIDs returns the run ids of WithRunID in c.
func RunIDs(c *lease.Config) []string {
	ids, _ := runIDKey.Get(c)
	return ids
}

// runIDQuery appends to opts the option of the run_id parameter of q, and
// deletes it from q.
func runIDQuery(q url.Values, opts []lease.Option) ([]lease.Option, error) {
	vs, ok := q[ParamRunID]
	if !ok {
		return opts, nil
	}
	delete(q, ParamRunID)
	if len(vs) != 1 {
		return nil, fmt.Errorf("%w: parameter %s given %d times", baton.ErrInvalidArgument, ParamRunID, len(vs))
	}
	return append(opts, WithRunID(strings.Split(vs[0], ",")...)), nil
}
