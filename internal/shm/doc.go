// Package shm holds what the shared-memory RW lock and semaphore (packages
// shmrw and shmsem) share: the race detector's view of their mappings, and
// the frame of their Inspect (opening the file, the Info fields alike).
//
// The race detector does not see memory outside the Go heap, so it misses
// the ordering that atomics in a shared mapping give the hardware: grants
// add an edge on an ordinary word per file and process (RaceSync,
// RaceAcquire, RaceRelease), which builds without the detector leave out.
package shm
