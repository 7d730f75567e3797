package pglock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// Execer is what runs a statement: *pgx.Conn, pgx.Tx, *pgxpool.Pool and
// *pgxpool.Conn.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// kindRow is the kind of LockRow's counter rows: they never meet a lock's.
const kindRow = "row"

// LockRow locks name inside the caller's transaction tx: it takes the row
// lock of name's row in the counter table (an upsert, which locks the row
// as SELECT ... FOR UPDATE does) until tx commits or rolls back, and
// returns a fencing token drawn from that row, greater than that of every
// earlier holder whose transaction committed. Waiting is bounded by ctx (a
// context that ends makes pgx close the connection, which rolls tx back)
// and by the session's lock_timeout.
//
// Nothing renews or watches this lock: it is the transaction's and ends
// with it. A holder whose transaction rolls back gives its token back, so
// write the protected resource in tx too (FencedUpdate on tx). The table is
// the one New creates (with the prefix of lease.WithPrefix, the only option
// LockRow reads): open a Backend on the database once first.
func LockRow(ctx context.Context, tx pgx.Tx, name string, opts ...lease.Option) (baton.Token, error) {
	if ctx == nil || tx == nil {
		return 0, fmt.Errorf("%w: nil context or transaction", baton.ErrInvalidArgument)
	}
	if err := baton.ValidateName(name); err != nil {
		return 0, err
	}
	c, err := buildOptions(opts)
	if err != nil {
		return 0, err
	}
	t := pgx.Identifier{c.Prefix + "tokens"}.Sanitize()
	var n int64
	err = tx.QueryRow(ctx, "INSERT INTO "+t+" AS t (kind, name, n) VALUES ($1, $2, 1)"+
		" ON CONFLICT (kind, name) DO UPDATE SET n = t.n + 1 RETURNING t.n", kindRow, name).Scan(&n)
	if err != nil {
		return 0, err
	}
	return baton.Token(n), nil
}

// FencedUpdate runs
//
//	UPDATE table SET set, fence = $N WHERE (where) AND fence <= $N
//
// with args for the placeholders $1 ... $N-1 of set and where, and the
// token as $N: the write of a holder whose token is older than the last one
// written to the row is refused. A holder may write with its own token as
// often as it likes; once a later holder has written, the earlier one is
// refused. The resource's table needs a bigint column named fence (0 for
// rows never written under a lock). table, set and where are SQL text, not
// values: pass only trusted strings.
//
// It returns the number of rows written, and an error matching
// baton.ErrLost when where matched no row that the token may write.
func FencedUpdate(ctx context.Context, ex Execer, table, set, where string, token baton.Token, args ...any) (int64, error) {
	if ctx == nil || ex == nil || table == "" || set == "" || where == "" || token == 0 || token > 1<<63-1 {
		return 0, fmt.Errorf("%w: FencedUpdate needs a context, an Execer, a table, a SET list, a WHERE condition and a token",
			baton.ErrInvalidArgument)
	}
	p := "$" + strconv.Itoa(len(args)+1)
	tag, err := ex.Exec(ctx, "UPDATE "+table+" SET "+set+", fence = "+p+" WHERE ("+where+") AND fence <= "+p,
		append(args[:len(args):len(args)], int64(token))...)
	if err != nil {
		return 0, err
	}
	if tag.RowsAffected() == 0 {
		return 0, fmt.Errorf("%w: no row of %s for token %d: a later holder wrote it, or none matched",
			baton.ErrLost, table, token)
	}
	return tag.RowsAffected(), nil
}
