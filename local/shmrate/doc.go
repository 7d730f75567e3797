// Package shmrate keeps a rate limit of package recipe in shared memory:
// the state of the generic cell rate algorithm, the theoretical arrival
// time of the next event, is one 64-bit word that every step updates with
// a compare-and-swap, so that no process ever waits for another and a
// process killed in the middle of a step leaves nothing to recover.
//
// The word holds the time, in microseconds of CLOCK_MONOTONIC (one clock
// for every process of the host; limits count in whole microseconds, see
// recipe.Limit.Interval), and in its top byte the generation of the
// limit's parameters. The parameters of the current generation and of the
// next sit in two slots beside it. A change of parameters (RateSet, or the
// first opener storing them) writes the other slot, under that slot's
// owner word, and then moves the word to the new generation with a
// compare-and-swap: every step is decided on the parameters of the
// generation its own compare-and-swap names, so a change is applied to
// every process at one instant or not at all, never half. A changer
// killed before the move leaves the slot to the next changer, which takes
// it over once the owner is dead.
//
// A limit is state: once its parameters are stored its file (DIR/rate/NAME)
// stays after every handle closed, as a written Value's does, until it is
// removed or a namespace on tmpfs goes with a reboot; the file of a limit
// never stored goes with the last handle of the host.
package shmrate

// Kind is the namespace directory of rate limits.
const Kind = "rate"
