// Package ipc is baton's operating-system layer for same-host primitives:
// the namespace directory that maps names onto files, System V semaphore
// sets and message queues, shared-memory regions, futex wait and wake on a
// word in a shared mapping, process identity for liveness checks, the
// Waiter, whose futex sleeps end when a watched process exits, and
// NotifyExit and WaitExit, which tell when a process exits through a pidfd.
//
// Linux is the target. On other systems the package builds and its calls
// return errors matching errors.ErrUnsupported.
package ipc
