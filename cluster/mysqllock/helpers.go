package mysqllock

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// Execer is what runs a statement: *sql.DB, *sql.Tx and *sql.Conn.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// LockRow locks name inside the caller's transaction tx: it takes the row
// lock of name's row in the lock table (SELECT ... FOR UPDATE, as an
// upsert) until tx commits or rolls back, and returns a fencing token drawn
// from the same counter as every later holder of that row lock. Waiting is
// bounded by the server's innodb_lock_wait_timeout and by ctx (a context
// that ends makes the driver close the connection, which rolls tx back).
//
// Nothing renews or watches this lock: it is the transaction's, and ends
// with it. The lock table is the one New creates (with the prefix of
// lease.WithPrefix, the only option LockRow reads); create the Backend once
// on the database first, since CREATE TABLE would commit tx.
func LockRow(ctx context.Context, tx *sql.Tx, name string, opts ...lease.Option) (baton.Token, error) {
	if ctx == nil || tx == nil {
		return 0, fmt.Errorf("%w: nil context or transaction", baton.ErrInvalidArgument)
	}
	if err := baton.ValidateName(name); err != nil {
		return 0, err
	}
	c, err := lease.Build(lease.Spec{Prefix: DefaultPrefix}, opts)
	if err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, "INSERT INTO `"+c.Prefix+"lock` (name, token) VALUES (?, LAST_INSERT_ID(1))"+
		" ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1)", key('t', name))
	if err != nil {
		return 0, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, err
	}
	return baton.Token(id), nil
}

// FencedUpdate runs
//
//	UPDATE table SET set, fence = token WHERE (where) AND fence <= token
//
// with args for the placeholders of set and then of where: the write of a
// holder whose token is older than the last one written to the row is
// refused. A holder writes with its own token as often as it likes; once a
// later holder has written, the earlier one is refused. The resource's
// table needs a BIGINT UNSIGNED column named fence (0 for rows never
// written under a lock). table, set and where are SQL text, not values:
// pass only trusted strings.
//
// It returns the number of rows written, and an error matching
// baton.ErrLost when where matched no row that the token may write.
func FencedUpdate(ctx context.Context, ex Execer, table, set, where string, token baton.Token, args ...any) (int64, error) {
	if ctx == nil || ex == nil || table == "" || set == "" || where == "" || token == 0 {
		return 0, fmt.Errorf("%w: FencedUpdate needs a context, an Execer, a table, a SET list, a WHERE condition and a token", baton.ErrInvalidArgument)
	}
	q := "UPDATE " + table + " SET " + set + ", fence = ? WHERE (" + where + ") AND fence <= ?"
	all := make([]any, 0, len(args)+2)
	nset := countPlaceholders(set)
	if nset > len(args) {
		return 0, fmt.Errorf("%w: %d arguments for %d placeholders of the SET list", baton.ErrInvalidArgument, len(args), nset)
	}
	all = append(all, args[:nset]...)
	all = append(all, uint64(token))
	all = append(all, args[nset:]...)
	all = append(all, uint64(token))
	res, err := ex.ExecContext(ctx, q, all...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, lostf("no row of %s for token %d: a later holder wrote it, or none matched", table, token)
	}
	return n, nil
}

// countPlaceholders counts the '?' of s outside quoted strings and
// identifiers.
func countPlaceholders(s string) int {
	n := 0
	var quote byte
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0:
			if ch == '\\' && quote != '`' {
				i++
			} else if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"' || ch == '`':
			quote = ch
		case ch == '?':
			n++
		}
	}
	return n
}
