package pglock

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// killSession ends the server sessions that hold the suite's Mutex name,
// as an operator's pg_terminate_backend does, and waits until they have
// ended. The hold goes with its session.
func killSession(cfg, name string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer c.Close(ctx)
	key := (&backend{o: lease.Config{Prefix: DefaultPrefix}}).key(baton.KindMutex, name)
	var n, ended int
	// The timeout makes pg_terminate_backend wait until the session is gone.
	err = c.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE pg_terminate_backend(l.pid, 5000)) FROM pg_locks l
WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND l.pid <> pg_backend_pid()
	AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND l.classid = (($1::bigint >> 32) & 4294967295)::oid AND l.objid = ($1::bigint & 4294967295)::oid`, key).Scan(&n, &ended)
	if err != nil {
		return false, err
	}
	if n != 1 || ended != 1 {
		return false, fmt.Errorf("%d sessions held %q, %d ended; want 1", n, name, ended)
	}
	return false, nil
}
