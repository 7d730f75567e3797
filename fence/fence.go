// Package fence keeps the storage side of fencing tokens: a resource that
// remembers the highest baton.Token it has accepted and refuses every
// write that carries a lower one. A holder that was paused or partitioned
// past its lease (its Hold.Lost closed, perhaps unseen) and whose lock
// another holder took since cannot then overwrite what the newer holder
// wrote: the newer holder's token is higher, and the guard saw it first.
//
// The package has the same-host guards and links no network client:
//
//   - Guard keeps the highest token in memory, for a resource served by one
//     process (a service that takes writes from many clients);
//   - File keeps it in a file beside the data, checked and advanced under
//     flock(2), for a resource written by several processes of one host.
//
// Guards of networked stores live with their clients: package
// cluster/redisfence runs a Redis write in one script with its check,
// cluster/etcdfence an etcd write in one transaction comparing the fence
// key, cluster/zkfence a ZooKeeper write in one multi with a version check
// of the fence node, and for SQL the resource's row carries its own fence column, written by
// cluster/pglock.FencedUpdate and cluster/mysqllock.FencedUpdate
// (UPDATE ... SET ..., fence = token WHERE ... AND fence <= token), in the
// caller's transaction if it likes (LockRow); they refuse a stale token
// with an error matching baton.ErrLost, as the guards here do.
//
// # Equal tokens
//
// Every guard accepts a token equal to the highest it has seen: a token
// belongs to one exclusive acquisition, so an equal token is the same
// holder writing again, which it may do as often as it likes. A lower
// token is refused with an error matching ErrStale (and baton.ErrLost:
// the writer's hold is gone, someone else has held the lock since). Token
// 0, which shared holds of some backends carry, is not a fencing token and
// is refused with baton.ErrInvalidArgument.
//
// A guard protects only writes that go through it, and only against
// holders of the same name: give each resource one guard and one lock
// name.
package fence

import (
	"errors"
	"fmt"
	"sync"

	"github.com/batonlock/baton"
)

// ErrStale is matched (errors.Is) by the error of every write a guard
// refuses because its token is lower than the highest the guard has
// seen. It wraps baton.ErrLost, so that errors.Is(err, baton.ErrLost)
// holds too, as it does for the SQL helpers' refusals.
var ErrStale = fmt.Errorf("fence: stale token: %w", baton.ErrLost)

// ErrCorrupt reports a fence file in which neither slot holds a valid
// token: the file was written by something else, or damaged. Every write
// is refused until it is repaired (removed, by someone who knows that no
// stale holder is left).
var ErrCorrupt = errors.New("fence: corrupt fence file")

// StaleError is the error of a refused write: Token was presented, Highest
// had been accepted before. It matches ErrStale and baton.ErrLost.
type StaleError struct {
	Token   baton.Token
	Highest baton.Token
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("fence: stale token %d: a holder with token %d has written since", e.Token, e.Highest)
}

// Unwrap returns ErrStale.
func (e *StaleError) Unwrap() error { return ErrStale }

func checkToken(t baton.Token) error {
	if t == 0 {
		return fmt.Errorf("%w: fence: token 0 is no fencing token", baton.ErrInvalidArgument)
	}
	return nil
}

// Guard is an in-process fence: the highest token accepted, in memory.
// The zero Guard has seen no token and is ready to use; a Guard must not
// be copied after first use. It is safe for concurrent use.
//
// Its memory is the process's: a resource that outlives the process (a
// file, a database) needs its highest token kept with it (File, or the
// store's own guard).
type Guard struct {
	mu      sync.Mutex // held by Check, and by Do while its fn runs
	highest baton.Token
}

// Check accepts token when it is at least the highest seen, and records
// it; otherwise it returns a *StaleError and changes nothing. Check alone
// does not order the caller's write after other writers' (a newer holder
// may check and write between this Check and the write that follows it);
// use Do, or call Check where the writes are serialised already.
func (g *Guard) Check(token baton.Token) error {
	if err := checkToken(token); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.accept(token)
}

// accept is Check's decision; g.mu is held.
func (g *Guard) accept(token baton.Token) error {
	if token < g.highest {
		return &StaleError{Token: token, Highest: g.highest}
	}
	g.highest = token
	return nil
}

// Do runs fn if token is at least the highest seen, with the guard locked
// until fn returns: no write with another token runs meanwhile, and once
// Do returns, every write with a lower token is refused. The token is
// recorded before fn runs and stays recorded whatever fn returns (a newer
// holder that tried to write, even in vain, still means that older ones
// must stop). Do returns fn's error, or a *StaleError without calling fn.
// fn must not call the guard.
func (g *Guard) Do(token baton.Token, fn func() error) error {
	if err := checkToken(token); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("%w: fence: nil function", baton.ErrInvalidArgument)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.accept(token); err != nil {
		return err
	}
	return fn()
}

// Highest returns the highest token accepted so far (0 before the first).
func (g *Guard) Highest() baton.Token {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.highest
}
