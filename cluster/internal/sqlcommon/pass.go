// Package sqlcommon holds what the SQL backends (pglock, mysqllock) share:
// the rule by which a hold is passed among the handles of a Backend, and
// the reading and waiting of a Value's row.
package sqlcommon

import (
	"time"

	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// PassLease moves the lease that k keeps to a new Loss, for a hold passed
// to another handle, and returns that Loss. It refuses when the lease is
// older than a renewal period (a renewal is late: the server is slow or
// unreachable), so that the hold goes back to the server rather than to a
// handle that would trust it for less than a renewal, and when the keeper
// can no longer pass it (lost, expired or stopped).
func PassLease(k *lease.Keeper, c *lease.Config) (*driver.Loss, bool) {
	if time.Until(k.Deadline()) < c.TTL-c.Drift-c.RenewEvery {
		return nil, false
	}
	loss := driver.NewLoss()
	if !k.Pass(loss) {
		return nil, false
	}
	return loss, true
}
