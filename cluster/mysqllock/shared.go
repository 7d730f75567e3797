package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	bdriver "github.com/batonlock/baton/driver"
)

// Modes of the rows of the hold table.
const (
	modeShared  = 0 // a reader, or permits of a semaphore
	modeExcl    = 1 // a writer
	modeWaiting = 2 // a queued writer or semaphore request; token is its place
)

// state is the table state of one RWMutex or Semaphore name: one row per
// holder and per queued request in the hold table, each with its own lease,
// changed only in short transactions that lock the name's row of the lock
// table first. Waiters sleep in the server until a release or a withdrawn
// request rings them (bell.go); a queued request keeps its place by
// renewing its row at each attempt, at least once a renewal period.
type state struct {
	b        *backend
	key      string
	rw       bool
	capacity int64
	row      rowOnce
}

// sgrant is the driver state of an RWMutex or Semaphore grant.
type sgrant struct {
	owner  string
	keeper *lease.Keeper
}

type holdRow struct {
	owner string
	mode  int
	n     int64
	token uint64
}

// try is the outcome of one attempt.
type try struct {
	tok  uint64
	ok   bool
	sent time.Time // when the attempt began: a grant's lease counts from it
	// fp is what a refused waiting request saw of the others' rows, to
	// sleep while it stays the same (see wait).
	fp string
}

// othersFP is the SQL expression of the rows of the name other than the
// caller's whose change may let a request in: their holders, modes and
// counts (not their expiries, which renewals move).
const othersFP = `CONCAT(COUNT(*), ':', COALESCE(SUM(CRC32(CONCAT(owner, '/', mode, '/', n))), 0))`

// attempt tries once to grant mode (n permits) to owner, making the name's
// row first when it is missing (swept, reclaim.go). With queue set, a
// refused request keeps (or takes) a place in the queue.
func (s *state) attempt(ctx context.Context, owner string, mode int, n int64, queue bool) (try, error) {
	t, missing, err := s.attemptOnce(ctx, owner, mode, n, queue)
	if err != nil || !missing {
		return t, err
	}
	bctx, cancel := s.b.bg(ctx)
	_, err = s.b.ensureRow(bctx, s.key, s.capacity)
	cancel()
	if err != nil {
		return t, err
	}
	t, _, err = s.attemptOnce(ctx, owner, mode, n, queue)
	return t, err
}

func (s *state) attemptOnce(ctx context.Context, owner string, mode int, n int64, queue bool) (t try, missing bool, err error) {
	bctx, cancel := s.b.bg(ctx)
	defer cancel()
	t.sent = time.Now()
	tx, err := s.b.db.BeginTx(bctx, nil)
	if err != nil {
		return t, false, err
	}
	defer tx.Rollback()
	var counter uint64
	var capacity int64
	if err := tx.QueryRowContext(bctx, `SELECT token, capacity FROM `+s.b.t.lock+` WHERE name = ? FOR UPDATE`, s.key).Scan(&counter, &capacity); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return t, true, nil
		}
		return t, false, err
	}
	hs, err := s.readRows(bctx, tx)
	if err != nil {
		return t, false, err
	}
	var place uint64 // this request's place in the queue; 0: none
	for _, h := range hs {
		if h.owner == owner && h.mode == modeWaiting {
			place = h.token
		}
	}
	t.ok = s.grantable(hs, owner, mode, n, place)
	switch {
	case t.ok:
		t.tok = counter + 1
		_, err = tx.ExecContext(bctx, `UPDATE `+s.b.t.lock+` SET token = ?, expires = UTC_TIMESTAMP(6) WHERE name = ?`, t.tok, s.key)
		if err == nil {
			_, err = tx.ExecContext(bctx, `REPLACE INTO `+s.b.t.hold+` (name, owner, mode, n, token, expires)
				VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)`, s.key, owner, mode, n, t.tok, s.b.ttlMicros())
		}
	case queue && place == 0 && (mode == modeExcl || !s.rw):
		_, err = tx.ExecContext(bctx, `UPDATE `+s.b.t.lock+` SET token = ?, expires = UTC_TIMESTAMP(6) WHERE name = ?`, counter+1, s.key)
		if err == nil {
			_, err = tx.ExecContext(bctx, `INSERT INTO `+s.b.t.hold+` (name, owner, mode, n, token, expires)
				VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)`, s.key, owner, modeWaiting, n, counter+1, s.b.ttlMicros())
		}
	case queue && place != 0:
		_, err = tx.ExecContext(bctx, `UPDATE `+s.b.t.hold+` SET expires = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE name = ? AND owner = ?`,
			s.b.ttlMicros(), s.key, owner)
	}
	if err == nil && !t.ok && queue {
		// In the transaction's view: a change committed since is in the
		// table when the waiter's sleep reads it, or rings it awake.
		err = tx.QueryRowContext(bctx, `SELECT `+othersFP+` FROM `+s.b.t.hold+` WHERE name = ? AND owner <> ?`, s.key, owner).Scan(&t.fp)
	}
	if err != nil {
		return t, false, err
	}
	if err := tx.Commit(); err != nil {
		return t, false, err
	}
	return t, false, nil
}

// readRows reads the name's rows in tx, which holds the name's row of the
// lock table, and deletes those whose lease has passed.
//
// The read locks nothing, and the rows are deleted one by one by their
// key: a delete of the name's range, or any locking read of it, would
// lock every row of the name until the commit, and a transaction stalled
// there (its client paused, swapped out or cut off) would hold back the
// holders' renewals and releases until their leases ran out. A row that
// the delete no longer finds expired was renewed after the read (which
// sees the rows as of its start): it is kept.
func (s *state) readRows(ctx context.Context, tx *sql.Tx) ([]holdRow, error) {
	rows, err := tx.QueryContext(ctx, `SELECT owner, mode, n, token, expires <= UTC_TIMESTAMP(6) FROM `+s.b.t.hold+` WHERE name = ?`, s.key)
	if err != nil {
		return nil, err
	}
	var hs, expired []holdRow
	for rows.Next() {
		var h holdRow
		var gone bool
		if err := rows.Scan(&h.owner, &h.mode, &h.n, &h.token, &gone); err != nil {
			rows.Close()
			return nil, err
		}
		if gone {
			expired = append(expired, h)
		} else {
			hs = append(hs, h)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, h := range expired {
		res, err := tx.ExecContext(ctx, `DELETE FROM `+s.b.t.hold+` WHERE name = ? AND owner = ? AND expires <= UTC_TIMESTAMP(6)`, s.key, h.owner)
		if err != nil {
			return nil, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			hs = append(hs, h)
		}
	}
	return hs, nil
}

// grantable decides a request on the rows of the name. Writers are
// preferred to readers, and queued requests are served in order: a request
// does not pass one queued before it (or any, when it has no place).
func (s *state) grantable(hs []holdRow, owner string, mode int, n int64, place uint64) bool {
	var used int64
	for _, h := range hs {
		if h.owner == owner {
			continue
		}
		switch {
		case h.mode == modeWaiting && (place == 0 || h.token < place):
			return false
		case h.mode == modeExcl:
			return false
		case h.mode == modeShared:
			if s.rw && mode == modeExcl {
				return false
			}
			used += h.n
		}
	}
	return s.rw || used+n <= s.capacity
}

func (s *state) grant(owner string, tok uint64, n int64, sent time.Time) bdriver.Grant {
	g := &sgrant{owner: owner}
	loss := bdriver.NewLoss()
	g.keeper = lease.StartKeeper(sent, &s.b.c, func(ctx context.Context) (time.Time, error) {
		sent := time.Now()
		res, err := s.b.db.ExecContext(ctx, `UPDATE `+s.b.t.hold+` SET expires = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
			WHERE name = ? AND owner = ? AND mode <> ? AND expires > UTC_TIMESTAMP(6)`, s.b.ttlMicros(), s.key, owner, modeWaiting)
		if err != nil {
			return sent, err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return sent, lostf("the hold row is gone")
		}
		return sent, nil
	}, loss, s.key[2:])
	return bdriver.Grant{Token: tok, Loss: loss, N: n, Data: g}
}

// acquire grants mode (n permits), waiting when wait is set.
func (s *state) acquire(ctx context.Context, mode int, n int64, wait bool) (bdriver.Grant, error) {
	if err := s.row.ensure(ctx, s.b, s.key); err != nil {
		return bdriver.Grant{}, err
	}
	owner := s.b.owner()
	backoff := time.Millisecond
	queued, warned := false, false
	for {
		t, err := s.attempt(ctx, owner, mode, n, wait)
		if err == nil && t.ok {
			if ctx.Err() != nil {
				s.drop(owner)
				return bdriver.Grant{}, ctx.Err()
			}
			return s.grant(owner, t.tok, n, t.sent), nil
		}
		queued = queued || wait
		if !wait {
			if err != nil {
				return bdriver.Grant{}, err
			}
			return bdriver.Grant{}, baton.ErrLocked
		}
		if err == nil {
			if err = s.wait(ctx, owner, t.fp); err == nil {
				backoff = time.Millisecond
				continue
			}
			if ctx.Err() != nil {
				s.drop(owner)
				return bdriver.Grant{}, ctx.Err()
			}
			// No sleeper connection: wait by the clock instead.
		}
		if !warned {
			warned = true
			// A lost connection or a restarted server: only the caller's
			// context ends a wait. Retrying with the same owner id is
			// safe: an attempt that committed unseen left rows of this
			// owner, which the next attempt finds as its own.
			s.b.c.Logger.Warn("baton: mysql: acquisition attempt failed; retrying", "name", s.key[2:], "err", err)
		}
		select {
		case <-ctx.Done():
			s.drop(owner)
			return bdriver.Grant{}, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 25*time.Millisecond, s.b.c.RenewEvery)
	}
}

// wait sleeps (bell.go) while the others' rows are as fp says, until the
// first of them expires, or for a renewal period at most: a queued request
// keeps its place by renewing its row at each attempt.
func (s *state) wait(ctx context.Context, owner, fp string) error {
	others := ` FROM ` + s.b.t.hold + ` WHERE name = ` + binLit(s.key) + ` AND owner <> ` + binLit(owner)
	cond := `(SELECT ` + othersFP + others + `) = '` + fp + `'`
	slice := `COALESCE(LEAST(` + seconds(s.b.c.RenewEvery) + `, GREATEST(0, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), (SELECT MIN(expires)` + others + `)) / 1000000)), ` + seconds(s.b.c.RenewEvery) + `)`
	return s.b.sleepWhile(ctx, s.b.mark(s.key), cond, slice, s.b.c.RenewEvery)
}

// drop deletes owner's rows (a queued place, or a grant that came too late).
func (s *state) drop(owner string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.b.c.RequestTimeout)
	defer cancel()
	if _, err := s.b.db.ExecContext(ctx, `DELETE FROM `+s.b.t.hold+` WHERE name = ? AND owner = ?`, s.key, owner); err != nil {
		s.b.c.Logger.Warn("baton: mysql: giving back a cancelled request failed; its lease will end it", "name", s.key[2:], "err", err)
		return
	}
	s.b.ring(s.b.mark(s.key)) // a request queued behind it may go now
}

// release gives back n permits of g (all when all is set).
func (s *state) release(ctx context.Context, gr bdriver.Grant, n int64, all bool) error {
	g, err := bdriver.DataOf[sgrant](gr)
	if err != nil {
		return err
	}
	if all {
		g.keeper.Stop()
		defer s.b.released()
	}
	bctx, cancel := s.b.bg(ctx)
	defer cancel()
	var res sql.Result
	if all {
		res, err = s.b.db.ExecContext(bctx, `DELETE FROM `+s.b.t.hold+` WHERE name = ? AND owner = ? AND mode <> ?`, s.key, g.owner, modeWaiting)
	} else {
		res, err = s.b.db.ExecContext(bctx, `UPDATE `+s.b.t.hold+` SET n = n - ? WHERE name = ? AND owner = ? AND mode <> ?`, n, s.key, g.owner, modeWaiting)
	}
	if err == nil {
		s.b.ring(s.b.mark(s.key))
	}
	if lerr := gr.Loss.Err(); lerr != nil {
		return lerr
	}
	if err != nil {
		return err
	}
	if k, _ := res.RowsAffected(); k == 0 {
		return lostf("the hold row is gone")
	}
	return nil
}

// rwlock is an RWMutex handle.
type rwlock struct{ state }

func (r *rwlock) mode(m bdriver.Mode) int {
	if m == bdriver.Shared {
		return modeShared
	}
	return modeExcl
}

func (r *rwlock) Acquire(ctx context.Context, m bdriver.Mode) (bdriver.Grant, error) {
	return r.acquire(ctx, r.mode(m), 1, true)
}

func (r *rwlock) TryAcquire(ctx context.Context, m bdriver.Mode) (bdriver.Grant, error) {
	return r.acquire(ctx, r.mode(m), 1, false)
}

func (r *rwlock) Release(ctx context.Context, g bdriver.Grant) error {
	return r.release(ctx, g, 1, true)
}

// Downgrade turns the writer's row into a reader's in place: no writer can
// come between.
func (r *rwlock) Downgrade(ctx context.Context, gr bdriver.Grant) (bdriver.Grant, error) {
	g, err := bdriver.DataOf[sgrant](gr)
	if err != nil {
		return bdriver.Grant{}, err
	}
	bctx, cancel := r.b.bg(ctx)
	defer cancel()
	res, err := r.b.db.ExecContext(bctx, `UPDATE `+r.b.t.hold+` SET mode = ? WHERE name = ? AND owner = ? AND mode = ?`,
		modeShared, r.key, g.owner, modeExcl)
	if err != nil {
		return bdriver.Grant{}, err
	}
	if k, _ := res.RowsAffected(); k == 0 {
		return bdriver.Grant{}, lostf("the hold row is gone")
	}
	return gr, nil
}

func (r *rwlock) Close() error { return nil }

// sem is a Semaphore handle.
type sem struct{ state }

func (s *sem) Acquire(ctx context.Context, n int64) (bdriver.Grant, error) {
	return s.acquire(ctx, modeShared, n, true)
}

func (s *sem) TryAcquire(ctx context.Context, n int64) (bdriver.Grant, error) {
	return s.acquire(ctx, modeShared, n, false)
}

func (s *sem) Release(ctx context.Context, g bdriver.Grant, n int64) error {
	if n > g.N {
		return fmt.Errorf("%w: release of %d permits of a grant of %d", baton.ErrInvalidArgument, n, g.N)
	}
	return s.release(ctx, g, n, n == g.N)
}

func (s *sem) Capacity() int64 { return s.capacity }

func (s *sem) Close() error { return nil }
