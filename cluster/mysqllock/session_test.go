package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/batonlock/baton/cluster/lease"
)

// killSession KILLs the connection that holds the user-level lock of the
// suite's Mutex name, and waits until the server has ended it. The hold
// survives: its row is the lock, renewed through the pool.
func killSession(_, name string) (bool, error) {
	if srv == nil {
		return false, fmt.Errorf("no server: %v", sharedErr)
	}
	db, err := sql.Open("mysql", srv.dsn())
	if err != nil {
		return false, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := &backend{c: lease.Config{Prefix: DefaultPrefix}}
	var id sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT IS_USED_LOCK(?)`, b.userLock(key('m', name))).Scan(&id); err != nil {
		return false, err
	}
	if !id.Valid {
		return false, fmt.Errorf("no session holds the user-level lock of %q", name)
	}
	if _, err := db.ExecContext(ctx, fmt.Sprintf("KILL %d", id.Int64)); err != nil {
		return false, err
	}
	for {
		var n int
		err := db.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.processlist WHERE id = ?`, id.Int64).Scan(&n)
		if err != nil || n == 0 {
			return true, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
