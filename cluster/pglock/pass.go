package pglock

import (
	"github.com/batonlock/baton/cluster/internal/sqlcommon"
	"github.com/batonlock/baton/driver"
)

// A Mutex's advisory lock belongs to a session of the Backend's pool, not
// to the handle that took it, so the core may pass it among the handles of
// one Backend with no statement (driver.Passer): the holding connection,
// its lease and its row go with the grant. The token sequence moves by
// passTokens+1 (INCREMENT BY 16 in the schema): an acquisition takes a
// value as its token, its k-th pass gets token+k, for k up to passTokens,
// and the next acquisition's token is higher than all of them. The lease
// row keeps the acquisition's token (renewals and the release match it).
const passTokens = 15

// mutexDriver is a lockDriver of a Mutex name; only these pass holds.
type mutexDriver struct{ *lockDriver }

// Pass hands the hold of g to another handle of the Backend. It refuses
// when the tokens are used up, the hold is lost, or its lease is older
// than a renewal period (a renewal is late: the server is slow or
// unreachable), and the core then releases g.
func (d *mutexDriver) Pass(g driver.Grant) (driver.Grant, bool) {
	h, err := driver.DataOf[hold](g)
	if err != nil || h.shared || h.keeper == nil || h.passes >= passTokens || h.loss.Err() != nil {
		return driver.Grant{}, false
	}
	loss, passed := sqlcommon.PassLease(h.keeper, &d.b.o)
	if !passed {
		return driver.Grant{}, false
	}
	// The grant passed from is dead from here (the core holds no other
	// call on it): the hold now answers to the new loss.
	h.loss = loss
	h.passes++
	return driver.Grant{Token: uint64(h.tok + h.passes), Loss: loss, Data: h}, true
}

var _ driver.Passer = (*mutexDriver)(nil)
