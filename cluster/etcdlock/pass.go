package etcdlock

import (
	"github.com/batonlock/baton/driver"
)

// A Mutex's hold is the key of the Backend's session, not of the handle
// that wrote it, so the core may pass it among the handles of one Backend
// with no request to etcd (driver.Passer). The key stays, with its lease and
// its watch; the hold gets a token of its own and a loss of its own.
//
// Tokens of a Mutex leave room for that: a key created at revision r is
// granted with token r<<passBits, and its k-th pass gets r<<passBits | k,
// for k up to maxPasses. Create revisions only grow, and no one else is
// granted the name while the key exists, so every later key's token is
// higher than all of these: tokens still only increase, but they are not
// create revisions (they jump by 1<<passBits from one key to the next).
const (
	passBits  = 4
	maxPasses = 1<<passBits - 1
)

// mutexToken returns the token of the k-th pass of a key created at rev.
func mutexToken(rev int64, k uint64) uint64 { return uint64(rev)<<passBits | k }

// mutexDriver is a lockDriver of a Mutex name; only these pass holds
// (a reader's hold and a writer's of an RWMutex do not).
type mutexDriver struct{ lockDriver }

// Pass turns g into a grant of the same key for another handle of the
// Backend. It refuses when the key's token range is used up, when the hold
// was lost (session ended, key removed, deadline passed) or was given back,
// and when the lease's renewals are late (session.pass); the core then
// releases g.
func (d *mutexDriver) Pass(g driver.Grant) (driver.Grant, bool) {
	lg, err := driver.DataOf[lockGrant](g)
	if err != nil || lg.pass >= maxPasses {
		return driver.Grant{}, false
	}
	loss := driver.NewLoss()
	if !lg.hw.pass(lg.s, lg.loss, loss) {
		return driver.Grant{}, false
	}
	ng := *lg
	ng.pass++
	ng.loss = loss
	return driver.Grant{Token: mutexToken(ng.rev, ng.pass), Loss: loss, Data: &ng}, true
}

var _ driver.Passer = (*mutexDriver)(nil)
