package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/listing"
)

// kinds maps the key prefix of a row to the kind of its object.
var kinds = map[byte]baton.Kind{'m': baton.KindMutex, 'r': baton.KindRWMutex, 's': baton.KindSemaphore, 'c': baton.KindCond}

func kindKey(kind baton.Kind, name string) (string, error) {
	for k, v := range kinds {
		if v == kind {
			return key(k, name), nil
		}
	}
	if kind == baton.KindChannel {
		// MySQL serves no channels: callers that ask every kind (baton
		// status) pass over them.
		return "", fmt.Errorf("%w: the MySQL Inspector shows no %s", baton.ErrUnsupported, kind)
	}
	return "", fmt.Errorf("%w: kind %q", baton.ErrInvalidArgument, kind)
}

// List returns the objects of every kind: the rows of the lock table
// (LockRow's rows are not objects of the Backend; a queue's token row
// names the queue) and the names with Cond waiters.
func (b *backend) List(ctx context.Context) ([]baton.Info, error) {
	rows, err := b.db.QueryContext(ctx, `SELECT name FROM `+b.t.lock+` WHERE name NOT LIKE 't:%'
		UNION SELECT DISTINCT name FROM `+b.t.cond)
	if err != nil {
		return nil, err
	}
	var refs []listing.Ref
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return nil, err
		}
		switch {
		case len(k) >= 3 && kinds[k[0]] != "":
			refs = append(refs, listing.Ref{Kind: kinds[k[0]], Name: k[2:]})
		case len(k) >= 3 && k[:2] == "q:": // a queue's token row (queue_inspect.go)
			refs = append(refs, listing.Ref{Kind: baton.KindQueue, Name: k[2:]})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return listing.Inspect(ctx, refs, b.Inspect)
}

func (b *backend) Inspect(ctx context.Context, kind baton.Kind, name string) (baton.Info, error) {
	if kind == baton.KindQueue {
		return b.inspectQueue(ctx, name)
	}
	k, err := kindKey(kind, name)
	if err != nil {
		return baton.Info{}, err
	}
	return b.inspectKey(ctx, k)
}

func (b *backend) inspectKey(ctx context.Context, k string) (baton.Info, error) {
	info := baton.Info{Name: k[2:], Kind: kinds[k[0]], Backend: b.Kind()}
	if k[0] == 'c' {
		info.Impl = "rows"
		err := b.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+b.t.cond+` WHERE name = ? AND signalled = 0 AND expires > UTC_TIMESTAMP(6)`, k).Scan(&info.Waiters)
		if err != nil {
			return info, err
		}
		if info.Waiters == 0 {
			return info, fs.ErrNotExist // nothing is kept for a Cond nobody waits on
		}
		return info, nil
	}
	var (
		token    uint64
		owner    string
		left     sql.NullInt64
		capacity int64
	)
	err := b.db.QueryRowContext(ctx, `SELECT token, owner, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires), capacity
		FROM `+b.t.lock+` WHERE name = ?`, k).Scan(&token, &owner, &left, &capacity)
	if err == sql.ErrNoRows {
		return info, fs.ErrNotExist
	}
	if err != nil {
		return info, err
	}
	info.LastToken, info.Capacity, info.Waiters = baton.Token(token), capacity, -1
	if k[0] == 'm' {
		info.Impl = "row+get_lock"
		if owner != "" && left.Int64 > 0 {
			info.Holders = []baton.Holder{{Owner: owner, Token: baton.Token(token), Mode: "exclusive", TTL: time.Duration(left.Int64) * time.Microsecond}}
		}
		return info, nil
	}
	info.Impl, info.Waiters = "rows", 0
	rows, err := b.db.QueryContext(ctx, `SELECT mode, n, token, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires), owner
		FROM `+b.t.hold+` WHERE name = ? AND expires > UTC_TIMESTAMP(6) ORDER BY token`, k)
	if err != nil {
		return info, err
	}
	defer rows.Close()
	for rows.Next() {
		var mode int
		var h baton.Holder
		var tok uint64
		var us int64
		if err := rows.Scan(&mode, &h.N, &tok, &us, &h.Owner); err != nil {
			return info, err
		}
		if mode == modeWaiting {
			info.Waiters++
			continue
		}
		h.Token, h.TTL, h.Mode = baton.Token(tok), time.Duration(us)*time.Microsecond, "shared"
		if mode == modeExcl {
			h.Mode = "exclusive"
		}
		if k[0] == 'r' {
			h.N = 0
		}
		info.Holders = append(info.Holders, h)
	}
	return info, rows.Err()
}

// Remove frees the object: a Mutex's row is freed (and left to the sweep,
// reclaim.go), an RWMutex's and a Semaphore's holders and queued
// requests are deleted (a Semaphore's row too, so it may be created again
// with another capacity), a Cond's waiters are woken, and a queue's jobs
// are deleted. Holders learn of
// the loss at their next renewal.
func (b *backend) Remove(ctx context.Context, kind baton.Kind, name string) error {
	if kind == baton.KindQueue {
		return b.removeQueue(ctx, name)
	}
	k, err := kindKey(kind, name)
	if err != nil {
		return err
	}
	info, err := b.inspectKey(ctx, k)
	if err != nil {
		return err
	}
	switch k[0] {
	case 'm':
		_, err = b.db.ExecContext(ctx, `UPDATE `+b.t.lock+` SET owner = '', expires = '1970-01-01' WHERE name = ?`, k)
	case 'r', 's':
		if _, err = b.db.ExecContext(ctx, `DELETE FROM `+b.t.hold+` WHERE name = ?`, k); err == nil && k[0] == 's' {
			// The floor first, so that the name's tokens go on from it.
			if err = b.raiseFloor(ctx, uint64(info.LastToken)); err == nil {
				_, err = b.db.ExecContext(ctx, `DELETE FROM `+b.t.lock+` WHERE name = ? AND token <= ?`, k, uint64(info.LastToken))
			}
		}
	case 'c':
		_, err = b.db.ExecContext(ctx, `UPDATE `+b.t.cond+` SET signalled = 1 WHERE name = ?`, k)
	}
	return err
}
