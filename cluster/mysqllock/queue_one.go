package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// A claim of one job in one request: the pick keeps the job's id,
// attempts and payload in user variables, the token's counter and the
// claim read them, and one last row answers for all, read before the
// commit, whose outcome the request then reports. LAST_INSERT_ID, set to
// 0 first, says whether the counter moved (its new value is the token),
// and ROW_COUNT in the last row whether the claim did: each statement of
// a request costs the server its own work and the client a read of its
// answer, so no statement only keeps a value. A request that picks
// nothing is followed by a read of when to look again: inside the
// request, that read would cost every claim the opening and planning of
// its subquery. A job picked on its last attempt is left to
// tryClaimMulti, which makes it a dead letter.

// claimOneSQL is the request; its arguments are claimOneArgs'.
func (d *queueDriver) claimOneSQL() string {
	return "START TRANSACTION; SET @baton_id = NULL, @baton_att = 0, @baton_max = 0, @baton_payload = NULL, @baton_tok = LAST_INSERT_ID(0); " +
		`SELECT id, attempts, max_attempts, payload INTO @baton_id, @baton_att, @baton_max, @baton_payload FROM ` + d.job +
		` WHERE queue = ? AND state = 0 AND ready_at <= UTC_TIMESTAMP(6) AND (owner = '' OR expires <= UTC_TIMESTAMP(6))` +
		` ORDER BY ready_at, id LIMIT 1 FOR UPDATE SKIP LOCKED; ` +
		`UPDATE ` + d.b.t.lock + ` SET token = LAST_INSERT_ID(token + 1) WHERE name = ? AND @baton_att < @baton_max; ` +
		`UPDATE ` + d.job + ` SET token = LAST_INSERT_ID(), owner = ?, expires = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, attempts = attempts + 1` +
		` WHERE queue = ? AND id = @baton_id AND LAST_INSERT_ID() > 0; ` +
		`SELECT @baton_id, @baton_att, @baton_max, LAST_INSERT_ID(), LAST_INSERT_ID() > 0, ROW_COUNT(), ` +
		`@baton_payload; COMMIT`
}

func (d *queueDriver) claimOneArgs(owner string) []any {
	return []any{d.name, d.toks, owner, d.b.ttlMicros(), d.name}
}

// dueSQL is the time in microseconds until the next delayed job or claim
// lease of the queue is due (NULL: none), with the queue's name as its
// argument.
func (d *queueDriver) dueSQL() string {
	return `SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), MIN(IF(owner = '' OR expires <= ready_at, ready_at, expires)))` +
		` FROM ` + d.job + ` WHERE queue = ? AND state = 0`
}

// dueAfter is the wait a due time read by dueSQL asks for. A time
// passed already is a job another claimant has locked, taken or given
// back in a moment.
func dueAfter(us sql.NullInt64) time.Duration {
	if !us.Valid {
		return 0
	}
	return max(time.Duration(us.Int64)*time.Microsecond, 10*time.Millisecond)
}

// errLastAttempt sends a claim to the two-request path.
var errLastAttempt = errors.New("the job picked is on its last attempt")

// tryClaimOne claims the oldest ready job in one request; with none it
// returns when to look again (0: none known).
func (d *queueDriver) tryClaimOne(ctx context.Context) (taken, time.Duration, error) {
	conn, err := d.b.db.Conn(ctx)
	if err != nil {
		return taken{}, 0, err
	}
	defer conn.Close()
	owner := d.b.owner()
	sent := time.Now()
	var id, last sql.NullInt64
	var att, maxAtt, counted, claimed int64
	var payload []byte
	answered := false
	err = multi(ctx, conn, d.claimOneSQL(), d.claimOneArgs(owner), func(r *sql.Rows) error {
		answered = true
		return r.Scan(&id, &att, &maxAtt, &last, &counted, &claimed, &payload)
	})
	switch {
	case err != nil:
	case !answered:
		err = errors.New("claim: no answer from the request")
	case !id.Valid:
		var due sql.NullInt64
		if err := conn.QueryRowContext(ctx, d.dueSQL(), d.name).Scan(&due); err != nil {
			return taken{}, 0, err
		}
		return taken{}, dueAfter(due), nil
	case att >= maxAtt:
		return taken{}, 0, errLastAttempt
	case counted != 1:
		err = fmt.Errorf("claim: the queue's token row %q is missing", d.toks)
	case claimed != 1 || !last.Valid:
		err = fmt.Errorf("claim: job %d was picked but not claimed", id.Int64)
	}
	if err != nil {
		abandon(conn)
		d.giveBackOwner(owner) // the commit may have run
		return taken{}, 0, err
	}
	if payload == nil {
		payload = []byte{}
	}
	got := []pick{{id: uint64(id.Int64), attempts: int(att), max: int(maxAtt), payload: payload}}
	return taken{got: got, owner: owner, last: uint64(last.Int64), sent: sent}, 0, nil
}
