package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/locktest"
)

func openCfg(cfg string) (baton.Backend, error) { return OpenURL(context.Background(), cfg) }

var suite = locktest.Suite{Name: "mysql", Open: openCfg, KillSession: killSession, Caps: locktest.Caps{
	RWMutex: true, Semaphore: true, Cond: true, Value: true, CrossProcess: true, Queue: true, KillBound: 6 * time.Second, Acquisitions: 2000, Lease: true},
	// Rows are swept an idle time (the TTL, 2 s here) and a quarter after
	// the last release; a Semaphore's row, with its capacity, stays.
	Reclaim: &locktest.Reclaim{Residue: residue, After: 3 * time.Second, NoSemaphore: true}}

// residue counts the rows that names leave: Mutex and RWMutex rows of the
// lock table, hold rows and Cond registrations.
func residue(cfg string) (int, error) {
	c, _, err := parseURL(cfg)
	if err != nil {
		return 0, err
	}
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return 0, err
	}
	defer db.Close()
	n, err := countRows(db, DefaultPrefix)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1146 {
		return 0, nil // no table yet: no row
	}
	return n, err
}

func countRows(db *sql.DB, prefix string) (int, error) {
	var n int
	err := db.QueryRow("SELECT (SELECT COUNT(*) FROM `" + prefix + "lock` WHERE name LIKE 'm:%' OR name LIKE 'r:%')" +
		" + (SELECT COUNT(*) FROM `" + prefix + "hold`) + (SELECT COUNT(*) FROM `" + prefix + "cond`)").Scan(&n)
	return n, err
}

func TestMain(m *testing.M) {
	if os.Getenv(envHold) != "" {
		os.Exit(runHold())
	}
	if os.Getenv(envTry) != "" {
		os.Exit(runTry())
	}
	if os.Getenv(envClaim) != "" {
		os.Exit(runClaim())
	}
	if os.Getenv("BATON_LOCKTEST_HELPER") == "" {
		srv, sharedErr = startShared()
	}
	locktest.Main(m, suite)
}

// Leases of 2 s keep the pause tests short and survive a loaded -race run.
const testQuery = "ttl=2s"

func TestConformance(t *testing.T) {
	s := sharedServer(t)
	createDB(t, s, "baton")
	locktest.Run(t, suite, s.url(testQuery))
}

// createDB creates database name on s if it is missing.
func createDB(t testing.TB, s *server, name string) {
	t.Helper()
	if _, err := s.admin(t).Exec("CREATE DATABASE IF NOT EXISTS `" + name + "`"); err != nil {
		t.Fatal(err)
	}
}
