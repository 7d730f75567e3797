package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// reasonLastAttempt is a dead letter's reason when its claimant was lost
// on the job's last attempt.
const reasonLastAttempt = "the claim of its last attempt was lost"

// Claim claims up to n ready jobs, oldest first; waiting, it sleeps on a
// connection of its own until woken (see queue.go).
func (d *queueDriver) Claim(ctx context.Context, n int, wait bool) ([]driver.Claim, error) {
	counted := false
	defer func() {
		if counted {
			d.countSleeper(-1)
		}
	}()
	// The first claim goes without the generation: only a claimant that
	// will sleep needs it, read before the claim that precedes its sleep.
	first := true
	for {
		var gen uint64
		if wait && !first {
			if err := d.b.db.QueryRowContext(ctx, `SELECT token FROM `+d.b.t.lock+` WHERE name = ?`, d.ids).Scan(&gen); err != nil {
				return nil, err
			}
		}
		cs, next, err := d.claimGathered(n)
		switch {
		case retryable(err):
			continue
		case err != nil:
			return nil, err
		case len(cs) > 0:
			return cs, nil
		case !wait:
			return nil, baton.ErrEmpty
		}
		if !counted {
			// Counted before the generation is read, so that a Put that
			// finds no sleeper counted has moved it already.
			if err := d.countSleeper(1); err != nil {
				return nil, err
			}
			counted = true
		}
		if first {
			first = false
			continue
		}
		if err := d.sleep(ctx, gen, next); err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// taken is what a claim statement took: the jobs got, in token order,
// for owner, the last token, and when the claim was sent (the leases
// start after it).
type taken struct {
	got   []pick
	owner string
	last  uint64
	sent  time.Time
}

// tryClaim claims up to n ready jobs in one transaction; with none it
// returns how long until the next delayed job or claim lease is due (0:
// none known).
func (d *queueDriver) tryClaim(ctx context.Context, n int) (taken, time.Duration, error) {
	if d.multi && n == 1 {
		cl, due, err := d.tryClaimOne(ctx)
		if !errors.Is(err, errLastAttempt) {
			return cl, due, err
		}
	}
	if d.multi {
		return d.tryClaimMulti(ctx, n)
	}
	tx, err := d.b.db.BeginTx(ctx, nil)
	if err != nil {
		return taken{}, 0, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, d.pickSQL(), d.name, n)
	if err != nil {
		return taken{}, 0, err
	}
	var got, dead []pick
	for rows.Next() {
		if got, dead, err = scanPick(rows, got, dead); err != nil {
			rows.Close()
			return taken{}, 0, err
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return taken{}, 0, err
	}
	if len(dead) > 0 || len(got) == 0 {
		due, done, err := d.noneOrDead(ctx, tx, got, dead)
		if done || err != nil {
			if err == nil {
				err = tx.Commit()
			}
			return taken{}, due, err
		}
	}
	res, err := tx.ExecContext(ctx, `UPDATE `+d.b.t.lock+` SET token = LAST_INSERT_ID(token + ?) WHERE name = ?`, len(got), d.toks)
	if err != nil {
		return taken{}, 0, err
	}
	last, err := res.LastInsertId()
	if err != nil {
		return taken{}, 0, err
	}
	owner := d.b.owner()
	sent := time.Now()
	// Row i gets the token last-len(got)+1+i.
	set, args := d.claimSQL(got, owner, "?")
	if _, err := tx.ExecContext(ctx, set, append([]any{uint64(last) - uint64(len(got))}, args...)...); err != nil {
		return taken{}, 0, err
	}
	if err := tx.Commit(); err != nil {
		d.giveBackOwner(owner) // the outcome is unknown
		return taken{}, 0, err
	}
	return taken{got: got, owner: owner, last: uint64(last), sent: sent}, 0, nil
}

// pick is a job row a claim read.
type pick struct {
	id            uint64
	attempts, max int
	payload       []byte
}

// pickSQL reads up to ? ready jobs of queue ?, oldest first, locking them
// and skipping those locked.
func (d *queueDriver) pickSQL() string {
	return `SELECT id, attempts, max_attempts, payload FROM ` + d.job +
		` WHERE queue = ? AND state = 0 AND ready_at <= UTC_TIMESTAMP(6) AND (owner = '' OR expires <= UTC_TIMESTAMP(6))` +
		` ORDER BY ready_at, id LIMIT ? FOR UPDATE SKIP LOCKED`
}

// scanPick adds the row of rows to got, or to dead when its attempts are
// used up.
func scanPick(rows *sql.Rows, got, dead []pick) ([]pick, []pick, error) {
	var r pick
	if err := rows.Scan(&r.id, &r.attempts, &r.max, &r.payload); err != nil {
		return got, dead, err
	}
	if r.payload == nil {
		r.payload = []byte{}
	}
	if r.attempts >= r.max {
		return got, append(dead, r), nil
	}
	return append(got, r), dead, nil
}

// sqlRunner is a *sql.Tx, or a *sql.Conn inside a transaction of its own.
type sqlRunner interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

// noneOrDead makes the picked jobs whose attempts are used up dead
// letters, and, with none to claim, says when to look again: done when
// the transaction is to be committed and the claim to end there.
func (d *queueDriver) noneOrDead(ctx context.Context, tx sqlRunner, got, dead []pick) (due time.Duration, done bool, err error) {
	for _, r := range dead {
		if _, err := tx.ExecContext(ctx, `UPDATE `+d.job+` SET state = 1, owner = '', ukey_live = NULL, reason = ?, died = UTC_TIMESTAMP(6) WHERE queue = ? AND id = ?`,
			reasonLastAttempt, d.name, r.id); err != nil {
			return 0, true, err
		}
	}
	if len(got) > 0 {
		return 0, false, nil
	}
	if len(dead) > 0 {
		return 0, true, nil // read again at once
	}
	var us sql.NullInt64
	if err := tx.QueryRowContext(ctx, d.dueSQL(), d.name).Scan(&us); err != nil {
		return 0, true, err
	}
	return dueAfter(us), true, nil
}

// claimSQL is the UPDATE that claims the jobs got for owner, and its
// arguments after base: base is the SQL of the token before the first
// job's (a placeholder whose argument the caller puts first, or an
// expression). FIELD numbers the ids from 1.
func (d *queueDriver) claimSQL(got []pick, owner, base string) (string, []any) {
	ids := make([]any, len(got))
	for i, r := range got {
		ids[i] = r.id
	}
	args := append(ids[:len(ids):len(ids)], owner, d.b.ttlMicros(), d.name)
	args = append(args, ids...)
	return `UPDATE ` + d.job + ` SET token = ` + base + ` + FIELD(id, ` + inList(len(ids)) + `), owner = ?,` +
		` expires = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, attempts = attempts + 1` +
		` WHERE queue = ? AND id IN (` + inList(len(ids)) + `)`, args
}

// giveBackOwner ends the claims of owner, whose transaction's outcome is
// unknown: whatever it claimed is ready again.
func (d *queueDriver) giveBackOwner(owner string) {
	bctx, cancel := context.WithTimeout(context.Background(), d.b.c.RequestTimeout)
	_, _ = d.b.db.ExecContext(bctx, `UPDATE `+d.job+` SET owner = '', expires = '1970-01-01' WHERE queue = ? AND owner = ?`, d.name, owner)
	cancel()
}

// newClaims makes the claims of the jobs got, committed for owner with
// the tokens up to last, their leases counted from sent.
func (d *queueDriver) newClaims(got []pick, owner string, last uint64, sent time.Time) []driver.Claim {
	dl := sent.Add(d.b.c.TTL - d.b.c.Drift)
	out := make([]driver.Claim, len(got))
	var lost []*qclaim
	d.mu.Lock()
	for i, r := range got {
		loss := driver.NewLoss()
		loss.SetDeadline(dl)
		c := &qclaim{id: r.id, owner: owner, loss: loss, attempt: r.attempts + 1, max: r.max}
		if d.closed {
			lost = append(lost, c)
		} else {
			d.claims[claimKey(owner, r.id)] = c
		}
		out[i] = driver.Claim{ID: r.id, Payload: r.payload, Attempt: r.attempts + 1, MaxAttempts: r.max,
			Token: last - uint64(len(got)-1-i), Loss: loss, Data: c}
	}
	d.mu.Unlock()
	if len(lost) > 0 {
		d.giveBack(lost)
	}
	return out
}

func claimKey(owner string, id uint64) string { return owner + "/" + strconv.FormatUint(id, 10) }

// renewals renews the leases of the handle's claims every renewal period,
// and fires the loss of those it finds gone.
func (d *queueDriver) renewals() {
	t := time.NewTicker(d.b.c.RenewEvery)
	defer t.Stop()
	for {
		select {
		case <-d.renewStop:
			return
		case <-t.C:
		}
		d.mu.Lock()
		cs := make([]*qclaim, 0, len(d.claims))
		owners := map[string]bool{}
		for _, c := range d.claims {
			cs = append(cs, c)
			owners[c.owner] = true
		}
		d.mu.Unlock()
		if len(cs) == 0 {
			continue
		}
		// The rows are found by their key, the job ids: a search by owner
		// would pass (and lock) every pending row of the queue, and wait
		// for any that a claimant has picked and not yet committed.
		where := d.claimedWhere(cs, owners)
		args := append([]any{d.b.ttlMicros()}, where.args...)
		ctx, cancel := context.WithTimeout(context.Background(), d.b.c.RequestTimeout)
		sent := time.Now()
		_, err := d.b.db.ExecContext(ctx, `UPDATE `+d.job+` SET expires = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND`+
			` WHERE `+where.sql, args...)
		var live map[string]bool
		if err == nil {
			live, err = d.owned(ctx, where)
		}
		cancel()
		if err != nil {
			continue // the deadlines stay; the losses fire when they pass
		}
		for _, c := range cs {
			if live[claimKey(c.owner, c.id)] {
				c.loss.SetDeadline(sent.Add(d.b.c.TTL - d.b.c.Drift))
			} else {
				c.loss.Fire(errors.New("the claim's lease ran out"))
				d.mu.Lock()
				delete(d.claims, claimKey(c.owner, c.id))
				d.mu.Unlock()
			}
		}
	}
}

// sqlPart is a condition and its arguments.
type sqlPart struct {
	sql  string
	args []any
}

// claimedWhere is the condition of the rows of claims cs (of owners)
// whose leases are live.
func (d *queueDriver) claimedWhere(cs []*qclaim, owners map[string]bool) sqlPart {
	args := make([]any, 0, 1+len(cs)+len(owners))
	args = append(args, d.name)
	for _, c := range cs {
		args = append(args, c.id)
	}
	for o := range owners {
		args = append(args, o)
	}
	return sqlPart{`queue = ? AND id IN (` + inList(len(cs)) + `) AND state = 0 AND expires > UTC_TIMESTAMP(6) AND owner IN (` +
		inList(len(owners)) + `)`, args}
}

// owned returns the claims among where's rows whose leases are live.
func (d *queueDriver) owned(ctx context.Context, where sqlPart) (map[string]bool, error) {
	rows, err := d.b.db.QueryContext(ctx, `SELECT owner, id FROM `+d.job+` WHERE `+where.sql, where.args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	live := map[string]bool{}
	for rows.Next() {
		var o string
		var id uint64
		if err := rows.Scan(&o, &id); err != nil {
			return nil, err
		}
		live[claimKey(o, id)] = true
	}
	return live, rows.Err()
}

// Ack deletes the job if the claim is still its owner.
func (d *queueDriver) Ack(ctx context.Context, dc driver.Claim) error {
	c := dc.Data.(*qclaim)
	bctx, cancel := d.b.bg(ctx)
	defer cancel()
	res, err := d.endExec(ctx, bctx, `DELETE FROM `+d.job+` WHERE queue = ? AND id = ? AND owner = ? AND state = 0`, d.name, c.id, c.owner)
	return d.ended(c, res, err, false)
}

// endExec runs a statement that ends a claim, again when the server chose
// it as a deadlock's victim or its lock wait timed out: the statement
// changed nothing then (it runs alone, its own transaction), and a claim
// of several jobs running beside it may have locked the rows it needs.
func (d *queueDriver) endExec(ctx, bctx context.Context, query string, args ...any) (sql.Result, error) {
	for {
		res, err := d.b.db.ExecContext(bctx, query, args...)
		if !retryable(err) || ctx.Err() != nil || bctx.Err() != nil {
			return res, err
		}
	}
}

// Retry makes the job ready at at, or a dead letter after its last
// attempt, if the claim is still its owner.
func (d *queueDriver) Retry(ctx context.Context, dc driver.Claim, at time.Time, reason string) error {
	c := dc.Data.(*qclaim)
	bctx, cancel := d.b.bg(ctx)
	defer cancel()
	var res sql.Result
	var err error
	if c.attempt >= c.max {
		res, err = d.endExec(ctx, bctx, `UPDATE `+d.job+` SET state = 1, owner = '', ukey_live = NULL, reason = ?, died = UTC_TIMESTAMP(6)`+
			` WHERE queue = ? AND id = ? AND owner = ? AND state = 0`, reason, d.name, c.id, c.owner)
		return d.ended(c, res, err, false)
	}
	if at.IsZero() {
		at = time.Unix(0, 0)
	}
	res, err = d.endExec(ctx, bctx, `UPDATE `+d.job+` SET owner = '', expires = '1970-01-01', ready_at = GREATEST(UTC_TIMESTAMP(6), ?)`+
		` WHERE queue = ? AND id = ? AND owner = ? AND state = 0`, at.UTC(), d.name, c.id, c.owner)
	return d.ended(c, res, err, true)
}

// ended finishes a claim after the statement that ended it.
func (d *queueDriver) ended(c *qclaim, res sql.Result, err error, ready bool) error {
	if err != nil {
		return err // the outcome is unknown: the core lets it be tried again
	}
	d.mu.Lock()
	delete(d.claims, claimKey(c.owner, c.id))
	d.mu.Unlock()
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		c.loss.Fire(errors.New("the claim's lease ran out and the job was claimed again"))
		return fmt.Errorf("%w: job %d", baton.ErrLost, c.id)
	}
	c.loss.SetDeadline(time.Time{})
	if ready {
		d.ring()
	}
	return nil
}

// giveBack fires the losses of claims and makes their jobs ready.
func (d *queueDriver) giveBack(cs []*qclaim) {
	args := []any{d.name}
	for _, c := range cs {
		c.loss.Fire(baton.ErrClosed)
		args = append(args, c.owner, c.id)
	}
	conds := strings.TrimSuffix(strings.Repeat("(owner = ? AND id = ?) OR ", len(cs)), " OR ")
	ctx, cancel := context.WithTimeout(context.Background(), d.b.c.RequestTimeout)
	_, err := d.b.db.ExecContext(ctx, `UPDATE `+d.job+` SET owner = '', expires = '1970-01-01' WHERE queue = ? AND state = 0 AND (`+conds+`)`, args...)
	cancel()
	if err == nil {
		d.ring()
	}
}

// Close gives back the claims still held (their leases end them if that
// fails) and stops the renewals.
func (d *queueDriver) Close() error {
	d.closeOnce.Do(func() {
		d.mu.Lock()
		d.closed = true
		var cs []*qclaim
		for _, c := range d.claims {
			cs = append(cs, c)
		}
		d.claims = nil
		d.mu.Unlock()
		close(d.renewStop)
		if len(cs) > 0 {
			d.giveBack(cs)
		}
		d.b.untrack(d)
		d.b.queues.Drop(d.name)
	})
	return nil
}
