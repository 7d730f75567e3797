package pglock

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/locktest"
)

func openSuite(cfg string) (baton.Backend, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return OpenURL(ctx, cfg, lease.WithTTL(2*time.Second))
}

var suite = locktest.Suite{Name: "postgres", Open: openSuite, KillSession: killSession, Caps: locktest.Caps{
	RWMutex: true, Semaphore: true, Cond: true, Value: true, Queue: true,
	CrossProcess: true,
	// A killed holder's session ends with its socket, but the next holder
	// waits out the lease it left (TTL 2 s): the server cannot tell a dead
	// client from a session ended under a live one.
	KillBound:    4 * time.Second,
	Acquisitions: 2000,
	Lease:        true,
	// A cancel request and the end of the statement, or the close of the
	// waiter's connection.
	CancelBound: 300 * time.Millisecond,
}, Reclaim: &locktest.Reclaim{Residue: residue, NoSemaphore: true}}

// residue counts the rows that names leave: lease rows but the marker, and
// Cond registrations. A semaphore's capacity row stays (doc.go), so the
// residue test uses no semaphore.
func residue(cfg string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer c.Close(ctx)
	var n int
	var made bool
	if err := c.QueryRow(ctx, `SELECT to_regclass('baton_leases') IS NOT NULL`).Scan(&made); err != nil || !made {
		return 0, err
	}
	err = c.QueryRow(ctx, `SELECT (SELECT count(*) FROM baton_leases WHERE kind <> '') + (SELECT count(*) FROM baton_cond)`).Scan(&n)
	return n, err
}

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(envServer) != "":
		os.Exit(runServer())
	case os.Getenv(envPause) != "":
		os.Exit(pausedHolder(os.Getenv(envPause)))
	case os.Getenv("BATON_LOCKTEST_HELPER") == "":
		startServer()
	}
	locktest.Main(m, suite)
}

func TestConformance(t *testing.T) {
	locktest.Run(t, suite, need(t))
}
