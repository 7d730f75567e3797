package zklock

import (
	"fmt"
	"testing"
	"time"

	"github.com/batonlock/baton/locktest"
)

// TestForeignGrant: a grant the drivers did not return is refused with
// driver.ErrForeignGrant, as on every backend.
func TestForeignGrant(t *testing.T) {
	b, _ := passDrivers(t, "zk://"+standalone(t)+"/foreign", "f", 0)
	locktest.ForeignGrant(t, b, fmt.Sprintf("foreign-%d", time.Now().UnixNano()))
}
