// Package ipc is baton's operating-system layer for same-host primitives:
// the namespace directory that maps names onto files, System V semaphore
// sets and message queues, shared-memory regions, futex wait and wake on a
// word in a shared mapping, process identity for liveness checks, and a
// pidfd that tells when a process exits (NotifyExit).
//
// Linux is the target. On other systems the package builds and its calls
// return errors matching errors.ErrUnsupported.
package ipc
