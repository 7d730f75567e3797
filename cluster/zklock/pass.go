package zklock

import (
	"fmt"
	"time"

	"github.com/batonlock/baton/driver"
)

// A Mutex's hold is a node of the Backend's session, not of the handle that
// created it, so the core may pass it among the handles of one Backend
// with no request to the server (driver.Passer). The node stays, with its
// place in the queue and its epoch; the hold gets a token of its own and a
// loss of its own.
//
// Tokens of a Mutex leave room for that: a node created in transaction z
// is granted with token z<<passBits, and its k-th pass gets z<<passBits | k,
// for k up to maxPasses. Zxids only grow, and no other acquisition of the
// name holds while the node exists, so every later node's token is higher
// than all of these: tokens still only increase, but they are not zxids
// (they jump by at least 1<<passBits from one node to the next).
const (
	passBits  = 4
	maxPasses = 1<<passBits - 1
	// maxZxid is the highest zxid a token can be made of. A zxid is the
	// leader's epoch in its high 32 bits: this leaves 2^28 elections.
	maxZxid = 1<<(64-passBits) - 1
)

// mutexToken returns the token of the k-th pass of a node created in
// transaction zxid.
func mutexToken(zxid, k uint64) uint64 { return zxid<<passBits | k }

// errZxidRange is returned when a zxid is too large to make a Mutex token.
var errZxidRange = fmt.Errorf("zxid beyond %#x: no fencing token can be made of it", uint64(maxZxid))

// mutexDriver is a lockDriver of a Mutex name; only these pass holds (the
// core passes no RWMutex grant).
type mutexDriver struct{ lockDriver }

// Pass turns g into a grant of the same node for another handle of the
// Backend. It refuses when the node's token range is used up, when the
// hold was lost (its epoch ended) and when heartbeats are late (epoch.pass);
// the core then releases g.
func (d *mutexDriver) Pass(g driver.Grant) (driver.Grant, bool) {
	lg, err := driver.DataOf[lockGrant](g)
	if err != nil || lg.pass >= maxPasses {
		return driver.Grant{}, false
	}
	loss := driver.NewLoss()
	if !lg.n.e.pass(lg.loss, loss, d.b.passLeft()) {
		return driver.Grant{}, false
	}
	ng := &lockGrant{n: lg.n, loss: loss, pass: lg.pass + 1}
	return driver.Grant{Token: mutexToken(lg.n.token, ng.pass), Loss: loss, Data: ng}, true
}

// passLeft is how long a hold's epoch must still last for the hold to be
// passed: what is left of it when the last heartbeat was answered at once,
// less two heartbeat periods. Less means a heartbeat is a whole period
// late (the server is slow or unreachable): the hold goes back to the
// server, and the next handle acquires with a heartbeat first.
func (b *backend) passLeft() time.Duration {
	return b.timeout() - b.margin() - 2*b.every()
}

var _ driver.Passer = (*mutexDriver)(nil)
