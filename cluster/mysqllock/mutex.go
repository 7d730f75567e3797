package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	bdriver "github.com/batonlock/baton/driver"
)

// mutex is one Mutex handle. The lock is its row in the lock table (owner,
// token, expiry); the handle's own connection also holds a user-level lock
// (GET_LOCK) of the name while it holds the row, so that waiters block in
// the server until the holder lets go, without polling.
type mutex struct {
	b     *backend
	key   string // row key
	ulock string // user-level lock name
	row   rowOnce

	mu     sync.Mutex
	sc     *sconn // guarded by mu: the handle's connection, nil until needed
	closed bool   // guarded by mu
}

// mgrant is the driver state of a Mutex grant.
type mgrant struct {
	owner  string
	held   bool   // the user-level lock is held on sc
	sc     *sconn // the connection that holds it
	keeper *lease.Keeper
	tok    uint64 // the token the claim drew
	passes uint64 // times the hold was passed on (pass.go)
}

// The claim takes the row when it is free or its lease has run out, draws
// the next token (the counter moves by passTokens+1, pass.go), starts the
// lease, and (get) tries the user-level lock at
// once, in one statement. Its insert id carries the token and whether the
// user-level lock was taken: token*2 + taken; 1 when the row is there but
// not free, 0 when it is missing (swept, reclaim.go). Every SET clause reads
// only the old row, so the statement means the same whether the server
// assigns left to right or simultaneously.
//
// A claim that queues (Lock's first claim) also leaves the row alone while
// another session holds the user-level lock: that session is, but for the
// cases below, a waiter the last release woke (the server grants the lock
// to the first waiter as the holder lets go), about to claim, so this claim
// waits behind it rather than taking the row first. The server grants
// user-level locks to waiters in the order they asked, so holders follow
// one another in that order too. A session can also hold the user-level
// lock with no claim to come (one that is ending, a holder whose row was
// removed): TryLock and a waiter whose slice ended without the lock claim
// past it.
const claimSet = `UPDATE %[1]s SET token = token + %[2]d + LAST_INSERT_ID((token + %[2]d) * 2 + %[3]s) * 0,
	owner = ?, expires = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
	WHERE name = ? AND IF((owner = '' OR expires <= UTC_TIMESTAMP(6))%[4]s, TRUE, LAST_INSERT_ID(1) = 0)`

// Kinds of claim.
const (
	claimHeld  = iota // the connection holds the user-level lock
	claimGet          // take the user-level lock too, if it is free
	claimQueue        // claimGet, but only while no other session holds it
)

func (m *mutex) claimSQL(kind int) string {
	switch kind {
	case claimHeld:
		return fmt.Sprintf(claimSet, m.b.t.lock, passTokens+1, "1", "")
	case claimGet:
		return fmt.Sprintf(claimSet, m.b.t.lock, passTokens+1, "COALESCE(GET_LOCK(?, 0), 0)", "")
	}
	return fmt.Sprintf(claimSet, m.b.t.lock, passTokens+1, "COALESCE(GET_LOCK(?, 0), 0)",
		" AND COALESCE(IS_USED_LOCK(?) = CONNECTION_ID(), TRUE)")
}

// claim runs the claim statement on c, and when the row is missing makes
// it and runs it again. ok reports whether the row was taken.
func (m *mutex) claim(ctx context.Context, c *sconn, owner string, kind int) (token uint64, took, ok bool, sent time.Time, err error) {
	token, took, ok, missing, sent, err := m.claimOnce(ctx, c, owner, kind)
	if err != nil || !missing {
		return token, took, ok, sent, err
	}
	if _, err := m.b.ensureRow(ctx, m.key, 0); err != nil {
		return 0, false, false, sent, err
	}
	token, took, ok, _, sent, err = m.claimOnce(ctx, c, owner, kind)
	return token, took, ok, sent, err
}

// claimOnce runs the claim statement on c; missing reports that the row is
// not there.
func (m *mutex) claimOnce(ctx context.Context, c *sconn, owner string, kind int) (token uint64, took, ok, missing bool, sent time.Time, err error) {
	bctx, cancel := m.b.bg(ctx)
	defer cancel()
	args := []any{}
	if kind != claimHeld {
		args = append(args, m.ulock)
	}
	args = append(args, owner, m.b.ttlMicros(), m.key)
	if kind == claimQueue {
		args = append(args, m.ulock)
	}
	sent = time.Now()
	res, err := c.exec(bctx, m.claimSQL(kind), args...)
	if err != nil {
		// What the server did is unknown: give back the row if it was
		// taken, and the connection with whatever user-level lock.
		m.dropConn(c)
		m.b.cleanupRow(m.key, owner)
		return 0, false, false, false, sent, err
	}
	c.used()
	n, _ := res.RowsAffected()
	id, _ := res.LastInsertId()
	if n == 0 {
		return 0, false, false, id == 0, sent, nil
	}
	return uint64(id) >> 1, kind == claimHeld || id&1 == 1, true, false, sent, nil
}

// cleanupRow frees k's row if owner holds it, in the background.
func (b *backend) cleanupRow(k, owner string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), b.c.RequestTimeout)
		defer cancel()
		_, _ = b.db.ExecContext(ctx, `UPDATE `+b.t.lock+` SET owner = '', expires = UTC_TIMESTAMP(6) WHERE name = ? AND owner = ?`, k, owner)
	}()
}

func (m *mutex) grant(c *sconn, owner string, token uint64, held bool, sent time.Time) bdriver.Grant {
	g := &mgrant{owner: owner, held: held, sc: c, tok: token}
	loss := bdriver.NewLoss()
	g.keeper = lease.StartKeeper(sent, &m.b.c, func(ctx context.Context) (time.Time, error) {
		return m.renew(ctx, g)
	}, loss, m.key[2:])
	return bdriver.Grant{Token: token, Loss: loss, Data: g}
}

// renew extends the lease on the holder's connection, which also keeps its
// session from ending idle; when that connection is gone, through the pool.
func (m *mutex) renew(ctx context.Context, g *mgrant) (time.Time, error) {
	q := `UPDATE ` + m.b.t.lock + ` SET expires = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
		WHERE name = ? AND owner = ? AND expires > UTC_TIMESTAMP(6)`
	sent := time.Now()
	var res sql.Result
	var err error
	if g.held {
		res, err = g.sc.exec(ctx, q, m.b.ttlMicros(), m.key, g.owner)
		if err != nil && ctx.Err() == nil {
			// The session is gone (killed, server restarted), and its
			// user-level lock with it; the row is still the lock.
			g.held = false
			m.dropConn(g.sc)
		} else {
			g.sc.used()
		}
	}
	if !g.held {
		sent = time.Now()
		res, err = m.b.db.ExecContext(ctx, q, m.b.ttlMicros(), m.key, g.owner)
	}
	if err != nil {
		return sent, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return sent, lostf("the lock row no longer names this holder")
	}
	return sent, nil
}

func (m *mutex) TryAcquire(ctx context.Context, mode bdriver.Mode) (bdriver.Grant, error) {
	if err := m.row.ensure(ctx, m.b, m.key); err != nil {
		return bdriver.Grant{}, err
	}
	c, err := m.getConn(ctx)
	if err != nil {
		if cerr := ctxEnded(ctx); cerr != nil {
			return bdriver.Grant{}, cerr
		}
		return bdriver.Grant{}, err
	}
	owner := m.b.owner()
	token, held, ok, sent, err := m.claim(ctx, c, owner, claimGet)
	if err != nil {
		return bdriver.Grant{}, err
	}
	if !ok {
		return bdriver.Grant{}, baton.ErrLocked
	}
	return m.grant(c, owner, token, held, sent), nil
}

func (m *mutex) Acquire(ctx context.Context, mode bdriver.Mode) (bdriver.Grant, error) {
	g, err := m.acquire(ctx)
	if err != nil {
		if cerr := ctxEnded(ctx); cerr != nil {
			// A connection that failed as the context ended failed because
			// it ended, as far as the caller is concerned; nothing is held.
			return g, cerr
		}
	}
	return g, err
}

// ctxEnded returns ctx's error, or context.DeadlineExceeded once its
// deadline has passed even if its timer has not run yet (a dial bounded by
// the deadline can fail first).
func ctxEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

func (m *mutex) acquire(ctx context.Context) (bdriver.Grant, error) {
	if err := m.row.ensure(ctx, m.b, m.key); err != nil {
		return bdriver.Grant{}, err
	}
	c, err := m.getConn(ctx)
	if err != nil {
		return bdriver.Grant{}, err
	}
	owner := m.b.owner()
	token, held, ok, sent, err := m.claim(ctx, c, owner, claimQueue)
	if err == nil && ok {
		return m.grant(c, owner, token, held, sent), nil
	}
	if err != nil {
		// The failed claim's owner id is being cleaned up: never reuse it.
		c, owner = nil, m.b.owner()
	}
	return m.wait(ctx, c, owner)
}

// wait blocks on the user-level lock, in slices of a renewal period, and
// claims the row whenever it gets the lock or a slice ends. A waiter that
// holds the user-level lock while the row is still taken (its holder lost
// its session but not its lease) polls the row instead, with backoff. A
// lost connection (killed, server restarted) is replaced, with backoff:
// only the caller's context ends the wait.
func (m *mutex) wait(ctx context.Context, c *sconn, owner string) (bdriver.Grant, error) {
	slice := strconv.FormatFloat(m.b.c.RenewEvery.Seconds(), 'f', 3, 64)
	held := false
	backoff := time.Millisecond
	giveBack := func() {
		if held && c != nil {
			bctx, cancel := m.b.bg(ctx)
			defer cancel()
			if _, err := c.c.ExecContext(bctx, `DO RELEASE_LOCK(?)`, m.ulock); err != nil {
				m.dropConn(c)
			}
		}
	}
	pause := func() error {
		select {
		case <-ctx.Done():
			giveBack()
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 50*time.Millisecond)
		return nil
	}
	if _, err := m.b.ensureRow(ctx, m.key, 0); err != nil && ctx.Err() != nil {
		return bdriver.Grant{}, ctx.Err()
	}
	for {
		if c == nil {
			held = false
			if err := pause(); err != nil {
				return bdriver.Grant{}, err
			}
			var err error
			if c, err = m.getConn(ctx); err != nil {
				if ctx.Err() != nil || errors.Is(err, baton.ErrClosed) {
					return bdriver.Grant{}, err
				}
				c = nil
				continue
			}
		}
		if !held {
			var got sql.NullInt64
			// The caller's context: if it ends, the driver closes the
			// connection, which holds nothing while it waits here.
			st, err := c.prepared(ctx, `SELECT GET_LOCK(?, `+slice+`)`)
			if err == nil {
				err = st.QueryRowContext(ctx, m.ulock).Scan(&got)
			}
			if err != nil {
				m.dropConn(c)
				c = nil
				if ctx.Err() != nil {
					return bdriver.Grant{}, ctx.Err()
				}
				continue
			}
			c.used()
			held = got.Valid && got.Int64 == 1
		} else if err := pause(); err != nil {
			return bdriver.Grant{}, err
		}
		if err := ctx.Err(); err != nil {
			giveBack()
			return bdriver.Grant{}, err
		}
		kind := claimHeld
		if !held {
			kind = claimGet
		}
		token, took, ok, sent, err := m.claim(ctx, c, owner, kind)
		if err != nil {
			c, owner = nil, m.b.owner()
			continue
		}
		if ok {
			return m.grant(c, owner, token, took, sent), nil
		}
	}
}

func (m *mutex) Release(ctx context.Context, gr bdriver.Grant) error {
	g, err := bdriver.DataOf[mgrant](gr)
	if err != nil {
		return err
	}
	g.keeper.Stop()
	defer m.settle(g.sc)
	// The release time on the row is when the name went idle.
	defer m.b.released()
	bctx, cancel := m.b.bg(ctx)
	defer cancel()
	// unsure: the release on the holder's session failed, and the server
	// may have run it all the same.
	freed, unsure := false, false
	if g.held {
		// One statement frees the row and the user-level lock; the latter
		// only if the row was still this holder's.
		res, err := g.sc.exec(bctx, `UPDATE `+m.b.t.lock+` SET owner = '', expires = UTC_TIMESTAMP(6),
			token = token + LAST_INSERT_ID(COALESCE(RELEASE_LOCK(?), 2)) * 0
			WHERE name = ? AND owner = ?`, m.ulock, m.key, g.owner)
		if err != nil {
			unsure = true
			m.dropConn(g.sc)
		} else {
			g.sc.used()
			if n, _ := res.RowsAffected(); n == 1 {
				freed = true
			} else if _, err := g.sc.c.ExecContext(bctx, `DO RELEASE_LOCK(?)`, m.ulock); err != nil {
				m.dropConn(g.sc)
			}
		}
	}
	if !freed && (!g.held || bctx.Err() == nil) {
		res, err := m.b.db.ExecContext(bctx, `UPDATE `+m.b.t.lock+` SET owner = '', expires = UTC_TIMESTAMP(6) WHERE name = ? AND owner = ?`, m.key, g.owner)
		if err != nil {
			if lerr := gr.Loss.Err(); lerr != nil {
				return lerr
			}
			return err
		}
		n, _ := res.RowsAffected()
		freed = n == 1
	}
	if err := gr.Loss.Err(); err != nil {
		return err
	}
	if !freed && !unsure {
		// With the lease still running, only this holder's release (or
		// an operator's rm) can have taken its owner id off the row: when
		// the release's outcome is unknown, it is taken to have run.
		return lostf("the lock row no longer names this holder")
	}
	return nil
}

func (m *mutex) Downgrade(ctx context.Context, g bdriver.Grant) (bdriver.Grant, error) {
	return bdriver.Grant{}, errors.ErrUnsupported
}

func (m *mutex) Close() error {
	m.b.untrack(m)
	m.closeConn()
	return nil
}
