// Package shmrw is a robust read-write lock in shared memory, for the
// processes of one host: futex wait and wake, no system call while nobody
// waits, and every hold of a process that dies given back.
//
// # Layout
//
// The lock is a file of the namespace (kind directory "shmrw") mapped
// shared. It holds a 64-bit state word, a fencing counter, a drain futex
// and a table of per-handle slots, one cache line each.
//
// The state word names the writer as the futex mutex does: the low half
// is a futex word with the writer's pid (22 bits) and flags, the high half
// the low 32 bits of the writer's start time; one compare-and-swap writes
// both. Flags: waiters sleep on the word; the writer is draining readers;
// a writer waits.
//
// A slot has two 64-bit words written by its handle only (and by whoever
// reclaims it from a dead process). The first names the handle's process
// (pid and start-time tag, as in the state word), plus a bit "holds a read
// lock" (the driver's read grant) and a bit "waits to write". The second
// counts the handle's anonymous read holds that baton's core takes
// without calling the driver (package internal/word): a generation in the
// high half, the number of holds in the low half. A handle claims a free
// slot when it is opened, starting a new generation, and frees it when it
// is closed, starting another, so that a stale handle's compare-and-swap
// of the count can never succeed on a slot claimed since.
//
// # Readers and writers
//
// A reader stores its slot with the read bit (or adds one to its count
// with a compare-and-swap) and then loads the state word: if no writer
// holds, drains or waits, it holds; otherwise it undoes its write and
// waits on the word. RUnlock clears the bit (or takes one off the count)
// and wakes the drain futex only when the state word says a writer drains.
// So an uncontended RLock+RUnlock is one atomic write to the handle's own
// slot and one load of the state word each way, with no system call and
// no write to a line that other readers write.
//
// A writer takes the state word with one compare-and-swap (writer bits
// set), which from then on turns away new readers, and then drains: it
// scans the slots in use for read bits and counts (its own slot's count
// too: the core counts its goroutines' holds there while another of them
// asks for the write lock) and sleeps on the drain futex until none is
// left. Both sides store first and load second with sequentially
// consistent atomics, so a reader and a writer that race cannot both miss
// each other: either the writer's scan sees the reader's bit, or the
// reader's load sees the writer. Downgrade sets the handle's read bit and
// then drops the writer from the word: no other writer can come between.
//
// Writer preference: a writer that finds another writer holding sets its
// slot's wait bit and the word's writer-waiting flag. While that flag is
// set readers wait, also after the holder has gone, so the waiting writer
// gets the lock before new readers; a reader still gets in whenever no
// writer holds or waits. The flag is a hint that the slots confirm: a
// reader that finds it set with no writer holding looks for a live slot
// with the wait bit (watching those processes while it sleeps), and clears
// the flag when there is none (the waiting writers died or gave up).
//
// # Death
//
// What a process holds is written, at every instruction, in words that
// name the process: the writer in the state word (one compare-and-swap
// takes the lock and records its owner), a reader in its slot (one store
// sets the bit in a word that already names the process). A SIGKILL
// between two instructions therefore leaves either nothing held or a hold
// that names a process that no longer runs. Before it sleeps (with no
// timeout), a waiter checks the processes it waits for, the writer or the
// readers, and watches them (ipc.Waiter: a pidfd each), so that an exit
// wakes it as a release would. It counts them dead as the futex mutex does
// (gone, zombie, exiting, SIGKILL pending, or its pid reused by a process
// with another start time), and
// take a dead writer's word over (the grant reports Recovered when the
// writer held the lock, not when it was still draining) or free a dead
// reader's slot. A reclaimer reads the count before the owner and clears
// it by a compare-and-swap that starts a new generation: a handle that
// claimed the slot after the read makes it fail, and a thread of the dead
// process still running for an instant cannot add to it after. A slot of a dead process that held nothing is reused by a
// later opener when the table is full.
//
// # Fencing
//
// Writers get a token from the counter in the file, incremented by the
// writer after draining: strictly increasing across processes, and across
// reclaims of the file (a new file counts on from the namespace's token
// floor, see ipc.OpenShared). Readers get the token 0; a downgraded grant
// keeps its writer's token.
//
// # Handles and reclaim
//
// The handles of a name in a process share one mapping of its file. The
// last of them to close in the host removes the file when no writer or
// reader holds the lock (a dead process's hold stays, for a waiter to
// recover).
//
// # What failures leave behind
//
// Removing the file (Remove) while the lock is held leaves the holders
// with a mapping nobody else opens; a watcher notices and fires the loss
// of every grant of the handle.
package shmrw
