package pglock

import (
	"fmt"
	"testing"
	"time"

	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/locktest"
)

// TestForeignGrant: a grant the drivers did not return is refused with
// driver.ErrForeignGrant, as on every backend.
func TestForeignGrant(t *testing.T) {
	o, err := buildOptions([]lease.Option{lease.WithTTL(faultTTL)})
	if err != nil {
		t.Fatal(err)
	}
	d := newBackend(poolT(t), false, o)
	t.Cleanup(func() { d.Close() })
	locktest.ForeignGrant(t, d, fmt.Sprintf("foreign-%d", time.Now().UnixNano()))
}
