// Package shmsem is a robust weighted semaphore in shared memory, for the
// processes of one host: FIFO across processes, futex wait and wake, no
// system call while nobody waits, and the permits of a process that dies
// given back.
//
// # Layout
//
// The semaphore is a file of the namespace (kind directory "shmsem")
// mapped shared, one mapping for the handles of a process (the last handle
// of the host to close removes the file when no permit is held, a dead
// process's included; the capacity goes with it, and the next opener sets
// it anew): its capacity, a ticket word (the next ticket to give and
// the ticket served, 32 bits each), a futex word that wakers bump, and a
// table of per-handle slots, one cache line each. A slot holds the
// handle's process (pid and start-time tag), the permits the handle holds
// (with a generation in the high half, see below), and its ticket while it
// waits.
//
// # The count is the sum of the slots
//
// There is no shared count of free permits. The permits in use are the sum
// of the slots' counts, and each handle changes only its own count, with
// one atomic add. Acquire adds n to its slot, then sums the slots in use:
// if the sum is within the capacity (and nobody queues, see FIFO) it holds,
// otherwise it takes its n back. Release subtracts n. Two acquirers that
// race both add before they sum, with sequentially consistent atomics: of
// any set of acquisitions that hold together, the one whose add came last
// summed every other's, so the sum it accepted bounds them all. (Acquire
// also sums once before it adds, and does not add when there is no room,
// so that a hopeless try does not disturb the head of the queue.) An
// uncontended Acquire+Release is thus two atomic adds on the handle's own
// line and reads of the lines in use, with no system call.
//
// # Crash safety
//
// A handle's holding is one number in a word that names its process, and
// it changes by one atomic instruction. A SIGKILL at any instruction
// leaves the count either before or after that instruction, and either way
// the number is exactly what the dead process held (an acquisition that
// had added but not yet summed holds its n, which is freed with the rest).
// Waiters sleep with no timeout, each watching (ipc.Waiter: a pidfd per
// process) the processes whose death it would have to repair: the head of
// the queue the processes with handles, holders among them (a handle
// that takes past a head rings it once, which then watches its process
// too), every other waiter the
// nearest waiter ahead of it (a waiter that leaves the queue rings the one
// behind it). A waiter woken by a death looks for slots with a count whose
// process is dead (gone, zombie, exiting, SIGKILL pending, or a later
// process with the same pid), sets their count to zero and frees the
// slot, or drops the ticket of a dead waiter ahead. The count shares its word with a
// generation that every claim of the slot advances, and is cleared by a
// compare-and-swap of the whole word read before the owner was: so a slow
// reclaimer can never clear the count of a handle that claimed the slot
// after it looked. A handle opened when no slot below the bound is free
// takes the slot of a dead process in the same way, so the bound (which
// every acquisition scans up to) stays near the most handles ever open at
// once.
//
// # FIFO
//
// An acquisition that cannot take its permits at once takes a ticket
// (fetch-and-add of the next ticket) and waits until its ticket is served;
// the head of the queue takes permits and then serves the next ticket. As
// with sync.Mutex, others may take free permits past a head that has
// waited less than starveAfter, which keeps permits busy while the head's
// process is being woken; once the head has waited longer, the starving
// word is set, and then only the head may take. It stays set while the
// queue drains in order, until a head is served that waited less than
// starveAfter since it queued, or the queue is empty: otherwise each head
// behind the first would face a fresh starveAfter of overtaking. The
// head's wait counts from when the head's ticket was served (a time in the
// header, CLOCK_MONOTONIC), not from when the head next ran, and whoever
// releases or fails to take past the head sets the word too: a head whose
// process the scheduler is slow to run is not overtaken meanwhile by
// processes that keep the CPUs it waits for. So a large request is not
// starved by small ones, in this process or another: it waits for about
// starveAfter, then for the holds of the heads before it.
//
// A waiter sleeps on a futex word of its own slot, which whoever may have
// made room for it (a release, the head before it) bumps; the word's low
// bit says that the waiter sleeps, so a bump makes a system call only
// then, and the bump that wakes clears the bit: a releaser that takes
// again at once, and bumps at every release, wakes the head once, not at
// every release until the head has run. A waiter's slot records its ticket (and, just before it takes one,
// that it is taking one), so a ticket whose waiter died, or gave up behind
// the head, is skipped: a waiter behind a served ticket that no live slot
// claims advances it. A waiter that finds its ticket passed takes a new
// one. The starving word names nobody: a head that dies with it set leaves
// it to the heads served after it, which clear it as above.
package shmsem
