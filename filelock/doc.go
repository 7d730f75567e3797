// Package filelock provides baton lock drivers on flock(2): a Mutex over
// one file and a writer-preferring RWMutex over a data file and a gate file.
// The local backend serves them by name; OpenMutex and OpenRWMutex open them
// over any path. OpenMutexIn opens a Mutex whose file goes when idle (the
// local backend's): the last handle of the process removes it if nobody
// holds it, and tokens continue from the namespace's token floor.
//
// The lock file stays open for the life of the handle (opened close-on-exec,
// so a child process never inherits a lock), and its first page is mapped
// shared: it holds a release generation that waiters sleep on with a futex
// (so waiting costs no CPU and a release wakes them at once), the fencing
// counter (incremented under the exclusive lock, so tokens survive restarts
// of every process), and the identity of the last exclusive holder.
//
// A holder that dies without unlocking does not bump the generation: the
// kernel drops its flock when the process ends. So before it sleeps (with
// no timeout) a waiter watches the holders' processes (ipc.Waiter: a pidfd
// each): the exclusive holder the page names when that process is alive,
// else every holder of the file read from /proc/locks; an exit wakes it
// as a release does. A cancelled waiter wakes itself at once. A program that
// is not baton and unlocks the file while it keeps running wakes nobody:
// waiters then take the lock at the next release or exit of a holder.
//
// Traps handled:
//   - A lock file removed or replaced while held: the lock taken is on an
//     orphan inode. After locking, acquisition checks fstat's link count of
//     the open file (0 once the path is removed or another file renamed
//     over it) and, if it is 0, unlocks and retries on the file the path
//     names now. While a hold is held, a watcher compares the path's device
//     and inode with the open file's when inotify reports a change of the
//     file's links (see ipc.PathChecker) and fires the hold's loss when
//     they differ; Release then returns an error matching baton.ErrLost.
//   - flock converts shared to exclusive (and back) by dropping the lock
//     first, so a plain flock RWMutex cannot downgrade atomically. Every
//     acquirer of the data file first holds the gate file, and a writer keeps
//     the gate for its whole hold, so the conversion of a downgrade happens
//     while nobody else can reach the data file.
//   - Writer preference: readers take the gate only for an instant, and a
//     writer that has the gate keeps new readers out while the readers
//     already in drain.
//
// NFS: Linux emulates flock on NFS with byte-range locks held by the
// client; the futex wake-up works only between processes of one machine,
// so on NFS waiters sleep in slices of 10 ms (a release on another machine
// wakes nobody here). Use a
// local file system (the default namespace is on tmpfs).
//
// The futex wait makes the package Linux-only: elsewhere OpenMutex and
// OpenRWMutex return an error matching errors.ErrUnsupported.
package filelock
