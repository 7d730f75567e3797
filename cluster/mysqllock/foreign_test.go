package mysqllock

import (
	"context"
	"database/sql"
	"testing"

	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/locktest"
)

// TestForeignGrant: a grant the drivers did not return is refused with
// driver.ErrForeignGrant, as on every backend, where it used to panic.
func TestForeignGrant(t *testing.T) {
	s := sharedServer(t)
	createDB(t, s, "baton")
	db, err := sql.Open("mysql", "root@tcp("+s.addr()+")/baton?parseTime=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	d, err := newBackend(context.Background(), db, []lease.Option{lease.WithTTL(testTTL)}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	locktest.ForeignGrant(t, d, "foreign")
}
