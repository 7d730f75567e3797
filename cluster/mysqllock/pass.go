package mysqllock

import (
	"github.com/batonlock/baton/cluster/internal/sqlcommon"
	bdriver "github.com/batonlock/baton/driver"
)

// A Mutex's row names the Backend's owner id of the hold, not a handle, and
// the connection that holds the name's user-level lock can go along with
// the hold, so the core may pass a hold among the handles of one Backend
// with no statement (driver.Passer): the row, the lease keeper and the
// connection go with the grant. A claim moves the row's counter by
// passTokens+1 and takes the value it reaches as the token; the k-th pass
// of the hold gets token+k, for k up to passTokens, and the next claim's
// token is higher than all of them.
const passTokens = 15

// Pass hands the hold of gr to another handle of the Backend. It refuses
// when the tokens are used up, the hold is lost, its connection no longer
// holds the user-level lock, or its lease is older than a renewal period
// (a renewal is late: the server is slow or unreachable); the core then
// releases gr.
func (m *mutex) Pass(gr bdriver.Grant) (bdriver.Grant, bool) {
	g, err := bdriver.DataOf[mgrant](gr)
	if err != nil || g.passes >= passTokens || !g.held || gr.Loss.Err() != nil {
		return bdriver.Grant{}, false
	}
	loss, passed := sqlcommon.PassLease(g.keeper, &m.b.c)
	if !passed {
		return bdriver.Grant{}, false
	}
	// The connection is the hold's from here: this handle opens another
	// when it needs one, and whoever releases the hold keeps it or gives it
	// back to the pool (settle).
	m.mu.Lock()
	if m.sc == g.sc {
		m.sc = nil
	}
	m.mu.Unlock()
	g.passes++
	return bdriver.Grant{Token: g.tok + g.passes, Loss: loss, Data: g}, true
}

// settle disposes of a released hold's connection sc: it stays the
// handle's if it was, becomes the handle's if the handle has none (the
// hold came by Pass), and goes back to the pool otherwise.
func (m *mutex) settle(sc *sconn) {
	sc.mu.Lock()
	dropped := sc.dropped
	sc.mu.Unlock()
	m.mu.Lock()
	switch {
	case m.sc == sc || dropped:
		m.mu.Unlock()
		return
	case m.sc == nil && !m.closed:
		m.sc = sc
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	sc.close(m.b.c.RequestTimeout)
}

var _ bdriver.Passer = (*mutex)(nil)
