// Package etcdlock is the etcd backend of baton: named mutexes, reader/writer
// locks, counting semaphores and condition variables kept in an etcd cluster,
// through the shared core (baton.NewBackend).
//
// # Model
//
// A Backend is bound to one etcd lease at a time, its session, kept alive in
// the background. Every acquisition writes its own key, bound to that lease,
// under a per-name directory; the order of the keys' create revisions is the
// order in which the waiters are served (FIFO, fair). The fencing token of a
// hold comes from its key's create revision, which etcd makes strictly
// increasing across the whole cluster.
//
//   - Mutex: the oldest key holds. A waiter watches only the key just before
//     its own (no herd) and, when that key changes, reads again. The core
//     passes a hold among the handles of one Backend with no request
//     (driver.Passer): the key stays, and each pass gets a higher token. So
//     a Mutex's token is the create revision times 16, plus the number of
//     passes (at most 15): tokens only grow, in steps of 16 or more from
//     one key to the next.
//   - RWMutex: a reader holds when no writer key is older than its own; a
//     writer holds when no key at all is older. Downgrade rewrites the
//     writer's key in place, in one transaction, so it keeps its place in the
//     order and no later writer can slip in.
//   - Semaphore: the capacity is recorded in a key without lease when the
//     name is first created; every later opener must ask for the same
//     capacity (baton.ErrMismatch otherwise). A request holds when the
//     permits of all keys up to and including its own fit in the capacity:
//     strict FIFO, so a large request is not starved by small ones. Waiters
//     watch the name's directory and keep the sum from the events, without
//     reading again.
//   - Cond: a waiter registers a key and watches it; Signal deletes the
//     oldest registered key, Broadcast all of them.
//   - Value: one key without lease (P value/<name>/v); the version is its
//     mod revision, so versions are etcd revisions (increasing, not
//     consecutive) and survive restarts with the data. CompareAndSwap is
//     one Txn that compares the mod revision (a missing key compares as 0)
//     and puts; Wait watches the key from the current revision, reads it
//     once the watch is created, and returns on the first later event.
//
// Two handles of one Backend share its session but never hold a key at
// once: each acquisition from etcd has its own key, so they exclude each
// other like two processes, and a Mutex key passed to another handle is
// the first handle's no more.
//
// # Options
//
// New and OpenURL take lease.Option values, the same as every lease
// backend's (package lease), so a program moves between backends by its
// constructor call alone; WithDialTimeout and WithTLS are this package's
// own. etcd counts lease TTLs in whole seconds. OpenURL also reads the
// options from the URL's query (ttl, renew_every, drift, request_timeout,
// prefix, dial_timeout).
//
// # Leases and loss
//
// The lease is renewed every renewal period (default a third of the TTL).
// A hold's driver.Loss fires when the lease is known to be gone (revoked or
// expired) or when it has not been renewed in time: the deadline is counted
// from when the last successful renewal was sent, less a drift margin, so it
// passes before the server can expire the lease and give the lock to someone
// else. It fires too when the hold's key is deleted by anyone else
// (Inspector's Remove, `baton rm`): the holds of a Backend in one directory
// share a watch of its deletes, kept across holds, and the delete reaches
// that watch when it reaches the next waiter's, which still
// has a read to make before it holds; a Remove through the holder's own
// Backend fires it before returning. A waiter whose lease ends while it is
// queued returns an error matching baton.ErrLost. After a loss the Backend
// takes a new lease for the next acquisition. A renewal with no answer by
// half of what is left of the lease is sent once more, and the client
// sends it to the next member: one member that stops answering does not
// cost the holds.
//
// A lock whose holder died comes free when etcd revokes the lease, which
// the server does from a loop that looks for expired leases every 500 ms:
// from the TTL after the holder's last renewal to half a second later.
//
// # Failures
//
// A failed or cancelled acquisition deletes the key it may have written; when
// etcd cannot be reached it keeps trying in the background until the key is
// gone or the lease ends, and the key never outlives the lease. The write of
// an acquisition's key is never abandoned half-way: etcd may apply a request
// its client gave up on after a delete sent later, which would leave a key
// that blocks the name. A caller whose context ends while the key is being
// written returns at once, and the key is deleted when etcd answers. A write
// that fails or times out is deleted at once and again one request timeout
// later. Unlock deletes the hold's key only if it is still the same key
// (compared by create revision), so it never releases another holder's
// lock; when the key is already gone it returns an error matching
// baton.ErrLost. Every other key of a name is a hold or a queued request,
// so a free name leaves no key (the tokens are revisions, global to the
// cluster). Semaphore capacity keys stay until removed (Inspector's
// Remove, or `baton rm`): open handles take the key's deletion for a
// Remove, so it cannot go with the last hold.
//
// A waiter (Mutex, RWMutex, Semaphore, Cond, and Value's Wait) is
// granted or fails with an error when the member that serves its watch
// dies or stops answering: a
// watch that has been silent for a request timeout asks for a progress
// report, and one that gets no answer within another request timeout is
// given up; the waiter reads again through the members that answer and
// watches on a new stream. Watches ask for a leader (WithRequireLeader), so
// a member cut off from the others ends them too.
//
// # Work queues
//
// Backend.Queue serves baton.Queue: a job is a key holding its record,
// named by when it is ready; a claim is a key on the session's lease,
// taken by a transaction on the job's revision, so a claimant that dies or
// whose lease is revoked gives its job back, its Loss firing first (the
// lease's local deadline, or the watch of the claim key). The token is the
// claim's revision. A Put is one transaction that writes its jobs' records
// and nothing all producers share: a job's id is the Put's revision times
// 1024, plus the job's place in the Put, so ids grow in the order of the
// Puts. Claimants sleep on a watch of the queue. The claims of one
// queue's handles in a Backend that come while a claim runs are served
// together by the next, in one read and one transaction, the oldest jobs
// to the first to come; such a transaction stays within the server's
// default --max-txn-ops, and a batch Claim too large for that runs alone.
// Their Acks and Retries are gathered too, each a transaction of its own
// nested in one request. An Ack, Retry or Fail whose request failed may
// have been applied; one called after it that finds the claim key gone
// reads the server's history to report what the earlier one did, and
// says that the outcome is unknown when that history is compacted.
//
// Limits: etcd's request size (--max-request-bytes, 1.5 MiB by default)
// bounds a payload to 1 MiB and a PutBatch, which is one request, to that
// size as a whole (refused before any write); a PutBatch of n jobs is
// also one transaction of n operations (2n with unique keys), which the
// server's --max-txn-ops (128 by default) must allow.
//
// etcd counts every key in a range it reads, whatever the read's limit,
// so a claim does not read all ready jobs of a large backlog: the handles
// of a queue in a Backend read a window of the oldest ones, sized from
// what the last read counted, and the whole range only when the window
// holds no job they can take. Claims still take the oldest job first,
// with one exception: claimants of several processes that keep finding
// their job taken by another's claim choose among a few of the oldest
// (fewer as the conflicts stop), so that they take different jobs, as
// claimants of a SQL server skipping each other's locked rows do.
//
// etcd also walks, in a range it reads, every key deleted there since its
// last compaction, and each job done leaves two (its record and its
// claim). So a claim's read starts at a floor, 20 ms before the oldest job
// the last read found, and reads the claims from the lowest id that read
// found, rather than ranging over all jobs and claims: a claim walks the
// jobs done that were put in those 20 ms before the oldest waiting one,
// not every job done. The floor makes a second exception to oldest-first:
// a job put by a producer whose clock is more than 20 ms behind the
// claimants' (or whose Put took longer to land) may sort below the floor;
// a claimant waiting on the queue sees it put and takes it, and otherwise
// a claim finds it at the next read from the first job, which comes once a
// second, or less often when such a read is slow (at most 2% of the time);
// a TryClaim may find the queue empty meanwhile. Stats and the Inspector
// still count whole ranges. Run the server with automatic compaction
// (--auto-compaction-mode and --auto-compaction-retention) under a queue
// that does many jobs: etcd's database grows with its history until then,
// up to its space quota; baton does not compact, which would take history
// from every other client of the server.
//
// Versions before this one took ids from a sequence key that every Put
// compared and wrote, and named every record by its id. Processes of such
// a version and of this one may serve a queue at once (a rolling
// upgrade): no job is claimed by two live claimants, none is lost, and
// tokens (claim revisions for both) keep growing. The earlier version
// does not read the records this one's Puts write, so its claimants claim
// only the jobs its producers put, and those this version gave back
// (Retry) or requeued, which are named by their id again; this version
// claims all of them, oldest first, under the claim key the earlier
// version uses for the same job. The first Put of this version on a queue
// moves the earlier version's sequence up to 1<<62, so that the ids its
// producers give from then on stay apart from this version's, and above
// them: ids of the two versions are not in the order of their Puts. The
// earlier version's Stats and Inspect do not count this version's jobs
// (and take their claims off the ready count), and its Put of a
// uniqueness key that a job of this version holds, not yet claimed, adds
// nothing and returns id 0. Rolled back to the earlier version, a queue's
// jobs put by this version wait, unclaimed, for a process of this
// version.
//
// A program that imports this package links the etcd client only, not the
// server.
package etcdlock
