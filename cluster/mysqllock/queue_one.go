package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// A claim of one job in one request: the pick keeps the job's id and
// attempts in user variables, the token's counter and the claim read them,
// and one last row answers for all. A request that picks nothing answers
// with when to look again as well, so that a claimant about to sleep
// needs no second request either. A job picked on its last attempt is
// left to tryClaimMulti, which makes it a dead letter.

// claimOneSQL is the request; its arguments are claimOneArgs'.
func (d *queueDriver) claimOneSQL() string {
	return "START TRANSACTION; SET @baton_id = NULL, @baton_att = 0, @baton_max = 0; " +
		`SELECT id, attempts, max_attempts INTO @baton_id, @baton_att, @baton_max FROM ` + d.job +
		` WHERE queue = ? AND state = 0 AND ready_at <= UTC_TIMESTAMP(6) AND (owner = '' OR expires <= UTC_TIMESTAMP(6))` +
		` ORDER BY ready_at, id LIMIT 1 FOR UPDATE SKIP LOCKED; ` +
		`UPDATE ` + d.b.t.lock + ` SET token = LAST_INSERT_ID(token + 1) WHERE name = ? AND @baton_att < @baton_max; ` +
		`SET @baton_rows = ROW_COUNT(); ` +
		`UPDATE ` + d.job + ` SET token = LAST_INSERT_ID(), owner = ?, expires = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, attempts = attempts + 1` +
		` WHERE queue = ? AND id = @baton_id AND @baton_rows = 1; ` +
		`SET @baton_claimed = ROW_COUNT(); COMMIT; ` +
		`SELECT @baton_id, @baton_att, @baton_max, LAST_INSERT_ID(), @baton_rows, @baton_claimed, ` +
		`(SELECT payload FROM ` + d.job + ` WHERE queue = ? AND id = @baton_id AND owner = ? AND @baton_claimed = 1), ` +
		`IF(@baton_id IS NULL, (` + d.dueSQL() + `), NULL)`
}

func (d *queueDriver) claimOneArgs(owner string) []any {
	return []any{d.name, d.toks, owner, d.b.ttlMicros(), d.name, d.name, owner, d.name}
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
	var id, last, due sql.NullInt64
	var att, maxAtt, counted, claimed int64
	var payload []byte
	answered := false
	err = multi(ctx, conn, d.claimOneSQL(), d.claimOneArgs(owner), func(r *sql.Rows) error {
		answered = true
		return r.Scan(&id, &att, &maxAtt, &last, &counted, &claimed, &payload, &due)
	})
	switch {
	case err != nil:
	case !answered:
		err = errors.New("claim: no answer from the request")
	case !id.Valid:
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
