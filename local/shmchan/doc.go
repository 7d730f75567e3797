// Package shmchan is the same-host channel (baton.Channel): a bounded ring
// of fixed slots in a region of shared memory (package ipc) that every
// process of the namespace maps, for many senders and many receivers.
//
// # The ring
//
// The region holds a header (the parameters, a closed flag, the head and
// tail positions, two futex words, a table of handles) and Capacity slots of
// MaxMessage bytes each. Position p lives in slot p mod Capacity, on lap p /
// Capacity. Each slot has one 64-bit state word: its lap, a phase (empty,
// writing, full, reading) and, while writing or reading, the handle that
// does it (an index into the table, whose entry names the process by pid
// and start time). Every step is one compare-and-swap of a state word, as
// in a Vyukov bounded MPMC queue, but the reservation names its reserver in
// the same instant:
//
//	sender:   empty(lap) → writing(lap, me) → copy → full(lap)
//	receiver: full(lap) → reading(lap, me) → copy → empty(lap+1)
//
// The tail and head positions only say where to look; whoever finds the
// slot at the tail (head) taken moves it on. A zeroed file is an empty ring
// on lap 0, so a new channel needs no initialisation beyond its
// parameters, set by one compare-and-swap.
//
// # Processes that die
//
// A sender killed between its reservation and its commit leaves a slot
// writing for a process that is gone: whoever would wait behind it (a
// receiver at the head, a sender that finds the ring full there) checks the
// owner and, once the process has exited (a zombie or reaped, so no thread
// of it can still write), turns the slot into empty(lap+1): the half-written
// message is dropped, and the receivers skip its position. A receiver killed
// while reading leaves reading(lap, gone), which the next sender there turns
// into empty(lap+1) the same way: that one message is lost, never delivered
// twice. A waiter blocked behind a live owner watches it with a pidfd
// (ipc.NotifyExit), so it wakes when that process dies without any timer.
// The table entry of a handle is freed by Close; entries of dead processes
// are taken over when the table is full, after the slots they name are
// recovered.
//
// # Waiting
//
// Receivers sleep on one futex word and senders on another. A waiter
// spins a few microseconds (less once its spins keep running out: see
// spin_linux.go), then sets its word's flag, looks again and sleeps on the
// word's value; a sender (receiver) that commits (frees) slots and finds
// the flag set clears it, bumps the word and wakes every sleeper: a waker
// that finds the flag cleared already leaves its slots to the wake-up of
// the one that cleared it, which must therefore reach all. So an
// uncontended send or receive makes no system call, and a batch makes at
// most one. A batch also walks from slot to slot on its own and moves the
// shared tail (head) once, at its end. A waiter killed while asleep leaves the flag set, which costs the next
// commit one wake-up and no more. Cancellation, Close and the removal of
// the file bump the word too.
//
// # One-to-one channels
//
// A channel created with baton.ChannelOptions.OneToOne has one sending and
// one receiving handle at a time and no state words: its ends publish a
// tail, a head and a freed mark once per call, and its slots hold the
// message alone (lengths are an array of their own). See one_linux.go.
//
// # Closing and removal
//
// CloseSend sets the closed flag and wakes every waiter. A sender checks
// the flag after its reservation and, finding it set, gives the slot up, so
// a receiver that finds the head empty with the flag set knows that no
// message can come any more. Removing the file (baton rm, Remove) leaves
// every handle with a mapping nobody else opens: a watcher of the file
// notices and makes every call of both ends fail with an error matching
// baton.ErrLost.
package shmchan

// Kind is the namespace directory of channels.
const Kind = "channel"
