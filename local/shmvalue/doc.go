// Package shmvalue is the same-host versioned value (baton.Value): a small
// datum and its version in a region of shared memory (package ipc) that
// every process of the namespace maps.
//
// The region holds a header (the committed version, a writer word) and two
// data slots. The version names the slot that holds its data: version n's
// data is in slot n mod 2. A write takes the writer word with one CAS
// (the word names the process: pid and start-time tag), checks the version,
// copies the new data into the other slot, and commits it with one CAS of
// the version, which is the only store that publishes anything. So a
// process killed at any instruction leaves either the old version with its
// slot intact (the half-written slot is not the current one) or the new
// version with its data complete: never a torn value, and never a version
// that goes back. A writer that finds the writer word held by a process that
// is gone, a zombie or not the recorded one (pid reused) takes the word
// over. It waits for the dead process to be a zombie, not merely to have
// SIGKILL pending: another thread of it may still run for an instant then,
// and could write into the slot the new writer fills. A writer that is
// stopped (SIGSTOP, a debugger) while it holds the word makes other writers
// wait until it runs again or dies; readers and waiters do not wait for it.
//
// Readers take no lock: they read the version, copy its slot and read the
// version again, and retry when it moved (a slot is rewritten only two
// versions later, after the version has changed). Every access to the
// region is atomic, so readers and writers never race in the memory model.
//
// Wait sleeps, with no timeout, on a futex on the low half of the version
// word; a writer wakes the sleepers after its commit when a waiter flag
// says someone may sleep. A writer killed between its commit and its
// wake-up wakes them by its exit: a writer wakes the sleepers when it
// takes the writer word too, and they watch the process it names
// (ipc.Waiter: a pidfd). A writer that finds the writer word held sleeps
// on it the same way. A waiter whose context ends is woken by a ring of
// its own.
//
// Versions are consecutive from 1 here. They last as long as the region's
// file: removing it, or a reboot of a namespace on tmpfs, starts the name
// over at version 0.
//
// A Value is state, so its file is not reclaimed once written: it stays
// after every handle closed, until removed (baton rm). The file of a
// value never written goes with the last handle of the host, as the files
// of idle locks do (ipc.OpenShared).
package shmvalue

// Kind is the namespace directory of values.
const Kind = "value"

// MaxData is the largest data a value holds (baton.MaxValueSize).
const MaxData = 4096
