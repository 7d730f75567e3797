// Package shm holds what the same-host primitives mapped from a file of
// the namespace (local/mutex, local/shmvalue, condvar, rwlock/shmrw and
// semaphore/shmsem) share: the opening of the file by a handle (OpenEntry: the pid check
// and the magic word), the watch of the file and the claim of a slot of a
// slot table (Attach), the race detector's view of their mappings, and the
// frame of their Inspect (opening the file, the Info fields alike).
//
// The race detector does not see memory outside the Go heap, so it misses
// the ordering that atomics in a shared mapping give the hardware: grants
// add an edge on an ordinary word per file and process (RaceSync,
// RaceAcquire, RaceRelease), which builds without the detector leave out.
package shm
