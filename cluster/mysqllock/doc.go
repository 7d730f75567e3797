// Package mysqllock is the MySQL and MariaDB backend of baton: named
// mutexes, reader/writer locks, counting semaphores and condition
// variables kept in three tables of one database, through the shared core
// (baton.NewBackend), on github.com/go-sql-driver/mysql. New takes the
// program's own *sql.DB; OpenURL opens one from a mysql:// URL.
//
// # Model
//
// Every hold is a row with an owner and an expiry (a lease of the TTL,
// default 10 s, counted by the server's clock), renewed in the background
// every renewal period. The lock table has one row per name in use, that
// carries the name's fencing counter, so tokens keep increasing across
// restarts of clients and of the server. The rows of Mutex and RWMutex
// names free for longer than the TTL are deleted; a floor row, raised
// before rows are deleted, is the counter a row made again starts from, so
// tokens keep increasing across that too. A Semaphore's row (its capacity)
// stays.
//
//   - Mutex: the name's row itself is the lock. One statement takes it
//     when it is free or its lease has run out, draws the next token and
//     starts the lease; one statement gives it back. The handle's own
//     connection (one per handle, kept while the handle is open) also holds
//     GET_LOCK of the name in the same statements, and waiters block in
//     GET_LOCK on their own connections, in slices of a renewal period, so
//     a release wakes the next waiter with no polling.
//   - RWMutex and Semaphore: a row per reader, writer or permit holder in
//     the hold table, and a row per queued writer or semaphore request
//     (which keeps its place in the order while it renews it). Each attempt
//     is one short transaction that locks the name's lock row, reaps
//     expired rows and decides: writers are preferred to readers, queued
//     requests are served in order. Waiters poll with backoff (1 ms,
//     doubling to 25 ms): GET_LOCK is exclusive, and MariaDB has no
//     NOTIFY.
//   - Cond: a row per registered waiter in the cond table; Signal marks the
//     oldest live one, Broadcast all; one goroutine per handle looks for
//     its marked rows with backoff while it has waiters.
//   - Value (baton.Value): a row of the value table with its data and a
//     version; CompareAndSwap is UPDATE ... WHERE version = old (an INSERT
//     IGNORE for old 0). Waiters poll, since nothing in the server can wake
//     them on a write (see value.go): one poller per Backend and name reads
//     the version for every waiting handle, from 1 ms doubling to 25 ms,
//     and a write through the same Backend wakes its waiters at once.
//
// # Why rows, not the session
//
// GET_LOCK alone is released whenever the holder's session ends: by KILL,
// by a server restart, or by the server ending an idle session. None of
// those tells the holder, which would go on trusting its lock while
// another client is granted it. A row is committed data: a killed
// connection or a restarted server leaves it in place, and the holder
// renews it through the pool. Only the lease's end frees it, and the
// holder's loss deadline (the send time of the last successful renewal +
// TTL - drift) passes before the server's expiry (its receipt of that
// renewal + TTL), so Hold.Lost() fires first. A holder that dies frees its
// Mutex after the TTL.
//
// A holder's connection that goes silent (a half-open TCP connection, a
// paused process) would keep its session, and the GET_LOCK that waiters
// block on, for as long as TCP keepalives take. The handle's connection is
// therefore given a session wait_timeout of the TTL rounded up to whole
// seconds: renewals keep it busy while it holds, and the server ends it
// once silent, which wakes the waiters; a waiter's GET_LOCK slice ending
// is the backstop.
//
// # Contexts and connections
//
// go-sql-driver closes a connection when a context ends during a query,
// which ends every lock of its session. Statements that change state
// (claims, releases, renewals, transactions) therefore run without the
// caller's cancellation, bounded by the request timeout; only the waits in
// GET_LOCK follow the caller's context, on a connection that holds nothing
// while it waits. A claim whose outcome is unknown (the connection failed)
// is given back by its owner id, and the id is never reused. Waiters of
// every kind keep waiting through a lost connection or a server restart;
// only their context ends a wait.
//
// # Inspection
//
// The Backend is a baton.Inspector (the baton command's status, ls and
// rm): a Mutex's holder, token and lease time left, an RWMutex's and a
// Semaphore's holders and queued requests, a Cond's waiters. Remove frees
// a Mutex; it deletes a Semaphore's row, so that it may be created again
// with another capacity, and its tokens go on from the floor.
//
// # Work queues
//
// Backend.Queue serves baton.Queue on MariaDB 10.6+ and MySQL 8.0+
// (SELECT ... FOR UPDATE SKIP LOCKED; older servers are refused when the
// queue is opened), in a fourth table, prefix + "job". A claim is a
// leased row, renewed like a hold's; the claims of a Backend's handles of
// one queue that come while a claim runs are made together by the next
// one. Payloads are at most 4 MiB, and a
// PutBatch at most the server's max_allowed_packet. The server has no
// NOTIFY: sleeping claimants are woken by KILL QUERY of their marked
// SLEEP, which works between connections of one database user (or a user
// with CONNECTION_ADMIN); others wake at the end of a slice (the TTL, or
// sooner when a delayed job or a claim's lease is due). PutTx and AckTx
// put and ack inside the caller's transaction.
//
// A claim of several jobs (ClaimBatch, or claims of many handles made
// together) takes two requests, its transaction open between them, and
// its pick keeps locked, until the commit, the claimed rows it passed on
// the way to the ones it takes (InnoDB keeps a locking read's locks on
// rows that do not match, under READ COMMITTED too), whose renewals wait
// for it. On MariaDB the claim's session has an idle_transaction_timeout
// of half a renewal period (at least 1 s): a claimant stalled between
// the two requests (paused, swapped out, cut off) longer has its session
// ended and its claim rolled back, and the others' renewals go on; with
// leases of 3 s or more they do in time. MySQL has no such setting:
// there a claimant stalled that way for about a lease makes those claims
// lose their leases. Renewals find their rows by key, so rows a claimant
// has picked hold back no one else's.
//
// # Helpers
//
// LockRow locks a named row inside the caller's own transaction (released
// at commit or rollback) and returns a token; FencedUpdate is a write that
// a stale token cannot make.
package mysqllock
