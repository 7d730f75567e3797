package recipe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"
	"time"

	"github.com/batonlock/baton"
)

// ErrNoLeader is returned by Election.Leader when no leader is elected.
var ErrNoLeader = errors.New("recipe: no leader")

// MaxLeaderValue is the longest value a leader can publish, in bytes.
const MaxLeaderValue = baton.MaxValueSize - recordHeader

// Election elects one leader among the candidates that campaign on the same
// name of one Backend, from any process or machine, and publishes the
// leader's value to every observer.
//
// Leadership is a hold of the name's Mutex: a candidate is leader from
// the moment its Lock returns, and stops being leader when it resigns
// (Unlock) or when the hold is lost. The leader's value is published in
// the name's Value, fenced by the hold's token: a write by a leader that
// was replaced (a larger token is published) is refused, so observers
// never go back to an older leader. On lease backends a hold reports its
// loss (Lost, Err, Context) once its lease's local deadline passes,
// before the server can give the Mutex to anyone else, so a leader learns
// that it is no longer leader before another is elected. A leader that
// dies is replaced by a waiting candidate once its Mutex is free: at once
// on the same host, when its lease runs out on a lease backend. On etcd
// that is up to the TTL after the dead leader's last renewal, then up to
// half a second more (etcd revokes expired leases from a loop that runs
// every 500 ms), then one handoff: the server's limit, which etcd's own
// concurrency package shares (bench's etcd-kill table measures both).
//
// An Election is safe for concurrent use; its candidates campaign in FIFO
// order.
type Election struct{ guarded }

// Leader is a published leader: its value and the fencing token of its
// leadership. The zero Leader means no leader.
type Leader struct {
	Value []byte
	Token baton.Token
}

// NewElection opens the Mutex and the Value of name on b.
func NewElection(ctx context.Context, b baton.Backend, name string) (*Election, error) {
	g, err := openGuarded(ctx, b, name)
	if err != nil {
		return nil, err
	}
	return &Election{g}, nil
}

// Close closes the Election's handles; a leadership still held ends.
func (e *Election) Close() error { return e.close() }

// Campaign waits until the caller is leader or ctx ends, then publishes
// value (at most MaxLeaderValue bytes) as the leader's. On failure it
// holds nothing and has published nothing that could outlive it: a
// publication that may have happened is withdrawn.
func (e *Election) Campaign(ctx context.Context, value []byte) (*Leadership, error) {
	if len(value) > MaxLeaderValue {
		return nil, fmt.Errorf("recipe: election %q: value of %d bytes, at most %d: %w", e.name, len(value), MaxLeaderValue, baton.ErrInvalidArgument)
	}
	if ctx == nil || baton.OwnerOf(ctx) != 0 {
		return nil, fmt.Errorf("recipe: election %q: a nil context or one with an Owner: %w", e.name, baton.ErrInvalidArgument)
	}
	hold, err := e.m.Lock(ctx)
	if err != nil {
		return nil, err
	}
	l := &Leadership{e: e, hold: hold}
	if err := l.publish(ctx, true, value); err != nil {
		// The write may have landed; take it back before the Mutex.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = l.publish(wctx, false, nil)
		return nil, errors.Join(err, e.m.Unlock(wctx))
	}
	return l, nil
}

// Leader returns the published leader, or an error matching ErrNoLeader.
// A leader that died stays published until a candidate is elected in its
// place (or forever, with no candidate); its Mutex is free then.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	data, _, err := e.v.Load(ctx)
	if err != nil {
		return Leader{}, err
	}
	r := decodeRecord(data)
	if !r.leading {
		return Leader{}, ErrNoLeader
	}
	return Leader{Value: r.value, Token: r.token}, nil
}

// Observe yields the published leader now, then each change of it (a new
// leader, a new value, or the zero Leader when the leader resigns), until
// ctx ends or the caller stops; changes in quick succession may be seen as
// one. It waits for the backend's notification, not by polling. An error
// other than the end of ctx is yielded once, and ends the sequence.
func (e *Election) Observe(ctx context.Context) iter.Seq2[Leader, error] {
	return func(yield func(Leader, error) bool) {
		data, ver, err := e.v.Load(ctx)
		var last record
		first := true
		for {
			if err != nil {
				if ctx.Err() == nil {
					yield(Leader{}, err)
				}
				return
			}
			r := decodeRecord(data)
			if !r.leading {
				r = record{}
			}
			if first || !r.same(last) {
				first = false
				if !yield(Leader{Value: r.value, Token: r.token}, nil) {
					return
				}
			}
			last = r
			data, ver, err = e.v.Wait(ctx, ver)
		}
	}
}

// Leadership is the caller's term as leader.
type Leadership struct {
	e        *Election
	hold     baton.Hold
	resigned atomic.Bool // the Mutex handle's hold may be another term's after Resign
}

// Token returns the fencing token of the leadership: larger than every
// earlier leader's on the name.
func (l *Leadership) Token() baton.Token { return l.hold.Token() }

// Lost returns a channel closed when the leadership is lost (not on
// Resign); see baton.Hold.Lost.
func (l *Leadership) Lost() <-chan struct{} { return l.hold.Lost() }

// Err returns nil while the caller is leader and an error matching
// baton.ErrLost once the leadership is lost.
func (l *Leadership) Err() error { return l.hold.Err() }

// Context returns a context derived from parent, cancelled when the
// leadership is lost: do the leader's work under it.
func (l *Leadership) Context(parent context.Context) (context.Context, context.CancelFunc) {
	return l.hold.Context(parent)
}

// Proclaim publishes a new value of the leader. It fails with an error
// matching baton.ErrLost when the leadership was lost or another leader
// is published.
func (l *Leadership) Proclaim(ctx context.Context, value []byte) error {
	if len(value) > MaxLeaderValue {
		return fmt.Errorf("recipe: election %q: value of %d bytes, at most %d: %w", l.e.name, len(value), MaxLeaderValue, baton.ErrInvalidArgument)
	}
	return l.publish(ctx, true, value)
}

// Resign withdraws the published value and ends the leadership (the next
// candidate is elected). It joins the errors of both; the Mutex is given
// back also when the withdrawal fails. A second Resign of one Leadership
// returns an error matching baton.ErrNotHeld and changes nothing.
func (l *Leadership) Resign(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("recipe: election %q: nil context: %w", l.e.name, baton.ErrInvalidArgument)
	}
	if l.resigned.Swap(true) {
		return fmt.Errorf("recipe: election %q: resign: %w", l.e.name, baton.ErrNotHeld)
	}
	err := l.publish(ctx, false, nil)
	if errors.Is(err, baton.ErrLost) {
		err = nil // Unlock reports the loss
	}
	return errors.Join(err, l.e.m.Unlock(ctx))
}

// publish writes the leader's record if the published one is older or
// this leadership's own: never over a newer leader's.
func (l *Leadership) publish(ctx context.Context, leading bool, value []byte) error {
	tok := l.hold.Token()
	_, err := swapValue(ctx, l.e.v, func(data []byte) ([]byte, error) {
		cur := decodeRecord(data)
		if cur.token > tok || !leading && cur.token != tok {
			if !leading {
				return nil, nil // someone else's record: nothing of ours to withdraw
			}
			return nil, fmt.Errorf("recipe: election %q: a newer leader (token %d) is published: %w", l.e.name, cur.token, baton.ErrLost)
		}
		if leading {
			if err := l.hold.Err(); err != nil {
				return nil, err
			}
		}
		return encodeRecord(record{token: tok, leading: leading, value: value}), nil
	})
	return err
}

// record is the Value of an election: the token of the leader that wrote
// it, whether it leads (false once it resigned), and its value.
type record struct {
	token   baton.Token
	leading bool
	value   []byte
}

const recordHeader = 9 // token, flag

func encodeRecord(r record) []byte {
	b := make([]byte, recordHeader, recordHeader+len(r.value))
	binary.BigEndian.PutUint64(b, uint64(r.token))
	if r.leading {
		b[8] = 1
	}
	return append(b, r.value...)
}

// decodeRecord reads a record; anything else (never written, or not an
// election's) reads as no leader.
func decodeRecord(b []byte) record {
	if len(b) < recordHeader {
		return record{}
	}
	return record{token: baton.Token(binary.BigEndian.Uint64(b)), leading: b[8] == 1, value: b[recordHeader:]}
}

func (r record) same(o record) bool {
	return r.token == o.token && r.leading == o.leading && string(r.value) == string(o.value)
}
