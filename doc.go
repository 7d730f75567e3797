// Package baton is the vocabulary of baton's locks: the Mutex, RWMutex,
// Semaphore and Cond interfaces that every backend serves, the Hold an
// acquisition returns, the sentinel errors, and the core that gives every
// backend the same semantics.
//
// A Backend opens primitives by name. The same-host backend (package local)
// needs no server; the cluster backends serve the same names to every
// machine: Redis (cluster/redislock: single node, Sentinel, Redis Cluster;
// cluster/redlock: a majority of independent nodes), etcd
// (cluster/etcdlock), PostgreSQL (cluster/pglock), MySQL and MariaDB
// (cluster/mysqllock) and ZooKeeper (cluster/zklock). A program moves from
// one to another by changing the constructor, or only the URL given to
// Open:
//
//	b, err := local.Open("")                             // this machine
//	b, err := redislock.OpenURL(ctx, "redis://host:6379") // a cluster
//	b, err := baton.Open(ctx, url)                       // any backend whose package is imported
//	m, err := b.Mutex(ctx, "cache/rebuild")
//
// Besides locks, a Backend opens versioned values (Value): a small datum
// and a version, written with CompareAndSwap against the version last
// read, and waited on with Wait. Every backend but Redlock serves them.
//
// # Holds
//
// Lock returns a Hold, a small value:
//
//	hold, err := m.Lock(ctx)
//	if err != nil {
//		return err // ctx ended (errors.Is(err, context.Canceled)), or the backend failed
//	}
//	defer m.Unlock(ctx)
//	store.Put(key, value, hold.Token()) // the store refuses tokens older than the newest it saw
//	select {
//	case <-hold.Lost(): // renewal failed past the lease deadline, or the lock file went
//		return hold.Err()
//	default:
//	}
//
// Token is a fencing token: strictly greater than every token given before
// for the name, on every backend, across processes and restarts. Lost closes
// when the hold can no longer be trusted, before the backend can give the
// lock to someone else; it does not close on a normal Unlock. Context turns
// the loss into a cancelled context for work done under the lock. Recovered
// reports that the previous holder died while holding (the protected state
// may need repair).
//
// # Semantics shared by every backend
//
//   - Every call that can wait takes a context; a cancelled wait returns an
//     error matching ctx.Err() and holds nothing.
//   - A handle is safe for concurrent use: goroutines sharing one handle
//     exclude each other exactly as processes do, in FIFO order.
//   - Reentrancy is by owner: with ctx = WithOwner(ctx), Lock by the owner
//     that holds increments a hold count and each Lock needs its Unlock.
//     Without an owner a second Lock waits, as with sync.Mutex.
//   - Readers and writers: writers are preferred; an owner holding the write
//     lock may take read locks, and keeps them, atomically, when it unlocks
//     the write lock; an owner holding only read locks that asks for the
//     write lock gets ErrUpgrade instead of deadlocking with itself. Without
//     an owner no caller is told apart from another (Go has no goroutine
//     identity), so RLock then Lock waits for ever, as with sync.RWMutex.
//   - Every error is one *Error naming the operation, backend, primitive and
//     name (`baton: redis mutex "x": lock: context canceled`), over a cause
//     that errors.Is matches against the sentinels of this package
//     (ErrNotHeld, ErrLost, ErrLocked, ErrClosed, ErrInvalidName,
//     ErrInvalidArgument, ErrUpgrade, ErrMismatch, ErrConflict,
//     ErrUnsupported) or the context's error.
//   - Bad input (names, counts, contexts) is refused before any side effect.
//     Names are 1 to 200 bytes of UTF-8 without control characters, in
//     '/'-separated segments that are neither empty, "." nor "..".
//
// # Observing
//
// Observe attaches an Observer to a Backend: the core then reports every
// acquisition (its start, its end with the wait), release (with the hold
// time), loss, handoff and error of every primitive, on every backend.
// LogObserver logs them with log/slog; package metrics exports them to
// Prometheus. An unobserved Backend pays one atomic load per operation.
//
// # Writing a backend
//
// A backend implements driver.Backend and the per-handle driver.Lock,
// driver.Semaphore and driver.Cond (package driver); NewBackend wraps it in the
// core, which keeps the semantics above. Drivers return bare causes; the
// core adds the *Error. Optional interfaces: Inspector (listing, for the
// baton command), TryFirst and WordLocker (cheaper uncontended paths),
// Passer (the core hands a Mutex among the handles of one Backend with no
// server call), ValueOpener (the backend serves Value; without it
// Backend.Value returns ErrUnsupported), RateOpener (the backend keeps
// package recipe's rate limits in a store of its own). The conformance
// suite in package locktest checks a backend against all of it.
package baton
