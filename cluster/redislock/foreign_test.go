package redislock

import (
	"testing"

	"github.com/batonlock/baton/locktest"
)

// TestForeignGrant: a grant the drivers did not return is refused with
// driver.ErrForeignGrant, as on every backend.
func TestForeignGrant(t *testing.T) {
	d, _ := passDrivers(t, startRedis(t), "foreign", 0)
	locktest.ForeignGrant(t, d, "foreign")
}
