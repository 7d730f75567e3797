// Package shmqueue is the same-host work queue (baton.Queue): the jobs of a
// queue in one file of the namespace (kind directory "queue"), mapped
// shared by every process that opens the queue.
//
// # Limits
//
// A queue holds at most Capacity jobs in every state (ready, delayed,
// claimed and dead letters together), each with a payload of at most
// MaxPayload bytes, a uniqueness key of at most baton.MaxJobKeyLen bytes and
// a dead letter's reason of at most baton.MaxReasonLen bytes. A Put that
// does not fit is refused (baton.ErrFull) before anything is written; so is
// a payload above MaxPayload (baton.ErrInvalidArgument, by the core). At
// most MaxProcs processes may have the queue open at once. The file is
// sparse: pages of slots never used take no memory.
//
// # Crash safety
//
// Every change but an Ack is made under a robust lock: a 64-bit word in the file
// that names its owner process (pid and the low bits of its start time),
// taken with one compare-and-swap. Waiters for it look at it for a few
// microseconds (a holder that runs is done by then), then sleep on a futex
// and check the owner when a sleep ends with the owner unchanged; an owner
// that is gone, a zombie or not the recorded process (pid reuse) is dead,
// and the waiter takes the lock over. The state of each job slot is one word,
// and a change to a job is published by one atomic store of that word, the
// last of the change; the ring of ready jobs, the stack of free slots and
// the earliest delay are derived from the slot words. A waiter that takes
// the lock over from a dead owner rebuilds them from the slot words
// before anything else, so a process killed at any instruction leaves no
// half-made change behind. An Ack is one compare-and-swap of its slot's
// state word, from claimed to acked: a claimed slot of a live claimant
// changes only by its claimant's hand, and acked slots are free to the
// next Put that needs them (it sweeps them into the free stack) and to a
// rebuild.
//
// A Put or a batch of them is atomic: a batch's slots are written as
// staged with the stamp of the batch, and published together by one store
// of the queue's committed stamp. Staged slots with a stamp beyond the
// committed one belong to a producer that died before publishing: the
// rebuild frees them. A Put of one job without a key needs no stamp: its
// slot is published by the store of its state word, as a change to a job
// is. The words that only holders of the lock read (the ring, the free
// stack and their ends, the fields of a slot) take plain stores before
// that store, which publishes them (and the lock's release) as well; a
// store made before its process was killed is in memory all the same.
//
// # Claims and death
//
// A claim records the claimant's process (pid and start time) and a token
// from the queue's counter in the file, which only grows. Every process
// that opens the queue enters itself in a table of participants in the
// file, and every handle watches every other participant through a pidfd
// in Go's netpoller (package ipc, WaitExit), starting at its first call
// after the participant joined (a waiting claimant's call is in progress,
// and starts at once): when one exits, the watchers give back its claims
// at once (to the front of the ready jobs, or to the dead letters when that
// claim was the job's last attempt) and wake the waiters. A producer killed between its
// publication and its wake-up is a participant too, so its death wakes
// the waiters. TryClaim, Stats and a full participant table check the
// participants' liveness directly, for processes that never wait.
//
// Claims are lost (their Loss fires) when the handle is closed, and when
// the queue's file is removed or replaced (Remove, baton rm): a handle that
// holds claims checks its file every ipc.WatchEvery; one that has held
// none for that long checks nothing.
//
// # Waiting
//
// A claimant waits on a futex word that every change making a job ready
// (or delaying one) increments; its sleep has no timeout, or the time
// until the earliest delayed job is due. Before it sleeps, a claimant
// that found no job looks at the word for up to tens of microseconds, in a
// flow of jobs sooner than a sleep and wake-up; one claimant of a queue
// at a time, and a short look only once such spins keep running out. There
// is no polling: an idle claimant sleeps in the kernel.
//
// The file counts the claimants asleep that no wake-up reached yet (a
// waker takes off those its futex wake woke, a sleep that ends otherwise
// takes itself off), and a change makes a futex wake only when one is
// counted: one per job made ready, less one that a spinning claimant
// takes (the change that counts on it clears its word, so the next one
// wakes a sleeper even if the spinner does not run). A claimant that claims and leaves ready jobs behind passes a
// wake-up on, and the death of a participant clears the spinner's word
// and wakes every sleeper (it may have died spinning). A claimant killed
// asleep leaves its count behind: the changes after it each make one
// futex wake that wakes nobody.
//
// The processes that share a queue must run one version of this
// protocol: a claimant of an earlier one takes itself off the count after
// every sleep, also one a waker took off, and the count that ends too low
// can leave a later sleeper unwoken until the next change. Stop a queue's
// processes to upgrade them.
//
// # Order
//
// Ready jobs are claimed in the order they became ready, except that a job
// given back by a dead claimant or a closed handle goes first. Times are
// the wall clock: a delayed job becomes ready when the system clock says
// so.
package shmqueue

// Kind is the namespace directory of queues.
const Kind = "queue"

const (
	// Capacity is the most jobs a queue holds, in every state.
	Capacity = 4096
	// MaxPayload is the largest payload of a job, in bytes.
	MaxPayload = 4096
	// MaxProcs is the most processes that may have a queue open at once.
	MaxProcs = 128
)
