// Package zklock is the ZooKeeper backend of baton: named mutexes,
// reader/writer locks, counting semaphores and condition variables kept in
// a ZooKeeper ensemble, through the shared core (baton.NewBackend), on the
// client github.com/go-zookeeper/zk.
//
// # Model
//
// Every acquisition creates its own ephemeral sequential node in the name's
// queue; the sequence numbers order the waiters (FIFO, fair), and every
// waiter watches one node, the nearest before it that blocks it, so a
// release wakes one waiter. The fencing token of a hold comes from its
// node's creation zxid, which ZooKeeper makes strictly increasing across
// the ensemble and which, unlike a sequence number, does not start again
// when a queue is removed: an RWMutex's or Semaphore's token is the zxid,
// a Mutex's the zxid shifted left by four bits (see below).
//
//   - Mutex: the first node holds; a waiter watches the node just before
//     its own.
//   - RWMutex: read and write nodes share one queue. A writer holds when it
//     is first, and watches the node just before it; a reader holds when no
//     write node is before it, and watches the nearest one. A reader that
//     comes after a waiting writer waits behind it (writer preference, as
//     baton.RWMutex promises). Downgrade marks the write node as a read node
//     in place (its data), so it keeps its place.
//   - Semaphore: the capacity is the data of the name's node, written when
//     the name is first used; every later opener must ask for the same
//     (baton.ErrMismatch otherwise). A node's data is its permits; a node
//     holds when the permits of all nodes up to and including it fit (strict
//     FIFO). A waiter watches its predecessor, which rewrites its data when
//     it is granted; the first waiter kept out by the permits in use watches
//     the holders.
//   - Cond: a waiter is a node that it watches; Signal deletes the oldest,
//     Broadcast all of them, after syncing their server with the leader.
//   - Value (baton.Value): the persistent node P/value/<name>, its data the
//     value's; the version is the node's modification zxid, which only
//     grows, and CompareAndSwap is a Set with the node version that went
//     with it. Wait is a data watch. The package never removes the node:
//     remove it by hand only while no handle of it is open (see value.go).
//
// # Passing a Mutex within a Backend
//
// A node belongs to the Backend's session, not to the handle that created
// it, so the handles of one Backend pass a Mutex among themselves with no
// request (the core's pass line, driver.Passer): only one handle of a name
// per Backend has a node in the queue, the others wait in the process, and
// a hold released while one of them waits goes to it, for a few
// milliseconds after it came from the server, before the node is deleted
// and other clients get their turn. A passed hold keeps the node and its
// epoch (so it is lost as the original would be) and gets a loss of its
// own and the token zxid<<4 | k for its k-th pass, up to 15; every later
// node's zxid is higher, so tokens keep increasing across clients. A hold
// is not passed when its heartbeats are late: it goes back to the server.
//
// # Sessions and loss
//
// A Backend trusts its ZooKeeper session from one answered heartbeat to
// the next: a request it sends every renewal period (lease.WithRenewEvery,
// default a third of the TTL), whose answer on the same session proves the
// server renewed the session after the send. A hold's driver.Loss carries
// the deadline send time + session timeout - margin, moved by each
// answered heartbeat; when the connection is lost the heartbeats stop and
// the deadline passes, so Hold.Lost fires before the ensemble can expire
// the session and give the lock to another client. The margin is a tenth
// of the session timeout plus the drift margin (lease.WithDrift): Lost
// fires at least that long before another client can be granted the lock,
// time for a holder that is slow to notice (a pause, a loaded machine).
// Options whose margin leaves no time to renew (drift + TTL/10 at least
// TTL - renewal period) are refused with baton.ErrInvalidArgument. The session timeout is
// the TTL (lease.WithTTL); OpenURL dials with it and counts with the
// timeout the server granted when that is shorter. A new session (the old
// one expired) ends every hold of the old one at once, and a waiter whose
// session expired or could have expired gets an error matching
// baton.ErrLost. Later acquisitions confirm the session with a heartbeat
// first.
//
// # Failures
//
// A cancelled or failed acquisition deletes its node. The create is never
// abandoned half-way: a caller whose context ends returns at once, and the
// node is deleted when the server answers. When the answer is lost with the
// connection, the node is looked for by its id, unique to the acquisition
// and part of its name (as "protected" nodes do), and deleted, at once and
// once more a request timeout later, since a create sent on a broken
// connection can still be applied. Nodes left by a client that died go
// with its session. Unlock deletes the hold's own node; when it is
// already gone it returns an error matching baton.ErrLost. When that node
// was the last in the queue, the same transaction deletes the name's
// persistent nodes (its queue and directory, with a semaphore's capacity),
// so a free name leaves no node; a creation that races it makes them again.
// Tokens are zxids, which never go back, so they keep increasing across
// that. A name whose last node went with a dead client's session keeps its
// directory until its next release.
//
// # Work queues
//
// Backend.Queue serves baton.Queue, as a distributed queue of znodes with
// leases and fencing tokens: a job is a persistent node holding its
// record, named by when it is ready and its id; a claim is an ephemeral
// node made with a versioned rewrite of the record in one multi-op, so a
// claim ends with its session, and its Loss fires when its epoch ends,
// before the server can expire the session. The token is the claim's
// zxid. Claimants sleep on child watches. Claims take the oldest ready
// job first, with one exception: claimants of several processes that
// keep finding their job taken by another's claim choose among a few of
// the oldest (fewer as the conflicts stop), so that they take different
// jobs, as claimants of a SQL server skipping each other's locked rows
// do.
//
// An Ack, Retry or Fail whose request failed may have been applied; one
// called after it that finds the claim's node gone, while the claim's
// session lives, knows that an end took it (only ends delete a claim's
// node then) and reports what it did. Which one is unknown, and said so,
// only when both an Ack and a Retry were tried and the job put back has
// been claimed and ended since.
//
// Limits: one request carries at most the server's jute.maxbuffer (1 MiB
// by default): a payload is at most 960 KiB and a PutBatch, one multi-op,
// must fit in one request (refused before any write). ZooKeeper reads a
// directory only whole, so a claim lists every job of the queue: its cost
// grows with the backlog, and a queue that holds many thousands of jobs at
// once is better served by a backend that reads by range.
//
// # Inspection
//
// The Backend is a baton.Inspector (baton status, ls, rm): holders and
// waiters are read from the queue by the rules above, with each holder's
// token and start; the process and host of a holder are not recorded.
// Remove deletes a name's nodes newest first, so that no waiter finds
// itself first meanwhile: waiters return ErrLost, holders learn it at
// Unlock.
package zklock
