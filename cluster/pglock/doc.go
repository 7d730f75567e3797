// Package pglock is the PostgreSQL backend of baton: named mutexes,
// reader/writer locks, counting semaphores and condition variables kept by
// a PostgreSQL server (on github.com/jackc/pgx/v5), through the shared core
// (baton.NewBackend). Open it with New on a pgxpool.Pool of the caller's,
// or with OpenURL on a postgres:// URL.
//
// # Model
//
// A hold is a session-level advisory lock of the server, taken on a
// connection of the pool that the hold keeps until it is released:
//
//   - Mutex: pg_advisory_lock on a 64-bit key hashed from the kind and the
//     name. A waiter blocks in the server, which wakes it when the lock is
//     released or its holder's session ends: no polling (after a session
//     that ended without a release, the waiter also waits out its lease;
//     see below).
//   - RWMutex: pg_advisory_lock_shared for readers. The server queues a new
//     reader behind a waiting writer, so writers are not starved. Downgrade
//     takes the shared lock while holding the exclusive one and releases the
//     latter in one statement.
//   - Semaphore: one advisory lock per permit and a gate lock, which makes
//     the queue FIFO whatever the sizes of the requests (see sem.go).
//   - Cond: a registration row per waiter; Signal deletes the oldest and
//     wakes its waiter by NOTIFY, carried to the waiters of a Backend by one
//     LISTEN connection.
//   - Value (baton.Value): a row of baton_values with its data and a
//     version; CompareAndSwap is one statement, UPDATE ... WHERE version =
//     old (an insert for old 0), that also notifies the name, and waiters
//     are woken by that NOTIFY on the same LISTEN connection: no polling.
//     Rows are never deleted, so versions never go back.
//
// The fencing token of a hold is drawn, in the statement that takes the
// lock and only once it is granted, from one sequence (baton_token_seq),
// so tokens increase strictly per name across clients and their restarts,
// and drawing one writes nothing. The tables are created on first use
// (Schema). The pool
// must reach PostgreSQL directly or through a pooler in session mode:
// advisory locks belong to the server session.
//
// # Work queues
//
// A Queue keeps its jobs as rows of one table (baton_jobs), claimed FOR
// UPDATE SKIP LOCKED in the order of their ready time (the server's clock
// when put, or when their delay ends) and id; a job whose claim lapsed
// keeps its place. The exception: a Backend's claims of a queue read from
// where its last claim stopped, rather than walk the rows ended since the
// table was last vacuumed (jobs_head.go), so a job that becomes claimable
// behind that point (put by a transaction that committed after younger
// jobs were claimed, or given back by another Backend) is claimed within
// a second, or once nothing younger is left, rather than in its place.
// Tokens come from the queue's row of baton_queues, which is never
// deleted. The claims of a Backend's handles of one queue that
// come while a claim statement runs are made together by the next one,
// and so are their Acks, so that a pool of workers in one process pays
// a statement per batch rather than per job. A claim is a lease on its row, renewed in the
// background on the handle's claimant session: when that session ends
// (pg_terminate_backend, a failover), the claim's Loss fires at its next
// renewal, before the lease passes and the job can be claimed again.
// Waiting claimants are woken by NOTIFY, which a Put sends only while a
// claimant of the queue counts itself waiting (a column of its row of
// baton_queues), so that a busy queue pays no notification per job. PutTx and AckTx (and PutSQLTx,
// AckSQLTx for database/sql) put and ack jobs in the caller's own
// transaction, so that a job commits with the data that caused it and its
// effect commits with its Ack. Payloads are at most MaxQueuePayload bytes,
// a PutBatch at most 64 MiB of them.
//
// # Leases and loss
//
// A session's locks go when the session ends. A session whose client is
// partitioned away (a half-open TCP connection) would keep them; so a
// holding session is told to end after being idle for a TTL
// (idle_session_timeout, set in the statement that takes the lock), and the
// holder renews on its connection every renewal period. The hold's Loss
// deadline is the send time of the last renewal plus the TTL minus a drift
// margin: the server starts its idle timer only after it answered, so the
// holder gives up before the server can end the session and grant the lock
// to anyone else. A renewal that fails means the connection, and so the
// lock, is gone: the Loss fires at once.
//
// A session can also end under a live client (pg_terminate_backend, a
// server restart), which frees its locks before the client can know. An
// exclusive hold therefore records on the name's row of baton_leases until
// when its lease runs, renewals push that back and the release clears it;
// the next holder of the name, reader or writer, waits out a lease left
// there before its Lock returns. A release deletes the row unless it keeps
// a lease that still runs, so a free name has none (baton ls shows held
// names only); the row of a holder that died goes once its lease ran out,
// when the next Backend sets up the schema or the name is next released.
// A semaphore keeps its capacity row. A holder that dies thus frees a Mutex or
// a write lock after its TTL. The table is UNLOGGED, so its writes cost no
// WAL, and the server empties it after a crash: a marker row says when it
// was last found empty, and a name without a row waits until the marker is
// a TTL old (see leases.go). Semaphore permits are not covered: they are
// freed when the session ends, and the fencing token is what protects a
// resource then.
//
// The lease is written per hold, not once per session, because the next
// holder must tell a holder that released from one whose session is
// ending, and a dying session gives its locks back one partition of the
// server's lock table at a time while it still shows as alive
// (TestDyingSessionOrder). Only a lock that the session kept in the first
// partition, which goes before the others, would tell them apart
// (TestDyingSessionPartitions); that rests on how the server's lock
// manager is built, not on what it documents, and the acquisition would
// still have to read the name's records with a snapshot taken after its
// grant, which costs about what the two writes do
// (BenchmarkUncontendedParts).
//
// The handles of one Backend pass a Mutex among themselves with no
// statement (see pass.go): the token sequence moves by 16, and a passed
// hold takes the next of the 15 values above its acquisition's token.
//
// # Inspection
//
// The Backend is a baton.Inspector (baton status, ls, rm). Holders and
// waiters are read from the server's lock table (pg_locks): a holder is
// named by its client process and host (Holder.PID and Host), which the
// session's application_name carries (ApplicationName: OpenURL sets it,
// a pool given to New needs it set to be named so; otherwise Host is the
// client address and PID is unknown), and by its session's server process
// (Holder.Owner "session <pid>", the process pg_terminate_backend takes);
// an exclusive holder also shows its token and what is left of its lease. Remove of a Mutex or RWMutex gives its lease row
// a new token, so that the exclusive holder's renewals fail, and ends the
// sessions that hold it, so that the lock is free and every holder's Loss
// fires; the row stays, with the lease it had, so the next holder waits
// that lease out. Remove of a Semaphore deletes
// its capacity row and ends the sessions holding permits; of a Cond, its
// registrations, which wakes the waiters; of a Queue, its jobs (their
// claims are lost at their next renewal; the token row stays). Ending another role's sessions
// needs the privileges of pg_signal_backend.
//
// # Cancellation
//
// pgx closes a connection when a context ends during a statement, which
// would drop every lock of its session; so statements on a holding
// connection never carry the caller's context. A waiting acquisition is
// ended by a cancel request (and the close of its socket if the server does
// not answer), and its connection is then closed rather than reused: its
// session ends with nothing held.
package pglock
