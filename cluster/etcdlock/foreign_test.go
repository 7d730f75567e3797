package etcdlock

import (
	"testing"

	"github.com/batonlock/baton/locktest"
)

// testForeignGrant: a grant the drivers did not return is refused with
// driver.ErrForeignGrant, as on every backend.
func testForeignGrant(t *testing.T, c *cluster) {
	_, d := fast(t, c, "foreign")
	locktest.ForeignGrant(t, d, "f")
}
