package redlock

import (
	"testing"

	"github.com/batonlock/baton/cluster/internal/redistest"
	"github.com/batonlock/baton/locktest"
	"github.com/redis/go-redis/v9"
)

// TestForeignGrant: a grant the driver did not return is refused with
// driver.ErrForeignGrant, as on every backend.
func TestForeignGrant(t *testing.T) {
	var cs []redis.UniversalClient
	for range 3 {
		c := redis.NewClient(&redis.Options{Addr: redistest.Start(t).Addr()})
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	d, err := newDriver(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	locktest.ForeignGrant(t, d, "foreign")
}
