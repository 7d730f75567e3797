// Package recipe builds coordination recipes once, on the primitives of
// package baton, so that every Backend serves them the same way:
//
//   - MultiLock: several names, possibly on several Backends, locked as
//     one lock in one global order, all or nothing.
//   - Election: leader election with a published value, resignation,
//     and an Observe sequence of leader changes; leadership is a Mutex
//     hold and ends with its loss.
//   - Latch: a countdown latch; Barrier: a gate set and removed by one
//     process for the others; DoubleBarrier: n members enter together and
//     leave together, and a dead member keeps no one waiting beyond its
//     lease.
//   - RateLimiter: a rate limit (GCRA: rate, period, burst) shared by
//     every process of a name, with its parameters stored with its state;
//     in the backend's own store when it has one (on the same host one
//     lock-free word of shared memory, on Redis one script), otherwise
//     over the name's Value.
//   - IntervalLock: a job run by one process at a time and at most once
//     per interval, given up after its longest time.
//   - PermitSemaphore: permits with ids and leases of their own, released
//     by id from any process, extended, and back when their lease ends.
//
// The shared state of the Election, Latch, Barrier and DoubleBarrier is a
// baton.Value, changed by CompareAndSwap and awaited with Value.Wait, so
// no recipe polls where the backend notifies. A recipe and a baton
// primitive on the same name do not collide unless they are of the same
// kind (a recipe's Mutex or Value); give each recipe a name of its own.
//
// The package imports only package baton: a same-host program that uses it
// with package local links no network client. Package recipetest is the
// suite that runs the recipes against a Backend.
package recipe
