package mysqllock

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/locktest"
)

func openCfg(cfg string) (baton.Backend, error) { return OpenURL(context.Background(), cfg) }

var suite = locktest.Suite{Name: "mysql", Open: openCfg, KillSession: killSession, Caps: locktest.Caps{
	RWMutex: true, Semaphore: true, Cond: true, Value: true, CrossProcess: true, Queue: true, KillBound: 6 * time.Second, Acquisitions: 2000, Lease: true}}

func TestMain(m *testing.M) {
	if os.Getenv(envHold) != "" {
		os.Exit(runHold())
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
