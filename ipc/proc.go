package ipc

import "fmt"

// Proc identifies one process across PID reuse: its pid and its start time.
// Two processes that ever had the same pid on one boot have different start
// times, so a Proc recorded by a process that died is never mistaken for a
// process that got its pid later.
//
// All processes that share a namespace must share one pid namespace: a pid
// recorded in one pid namespace means another process (or none) in another.
type Proc struct {
	PID   int
	Start uint64 // start time after boot, in clock ticks (field 22 of /proc/PID/stat)
}

// Tag returns the low 32 bits of the start time, which is what the futex
// mutex records beside a pid. Two processes with the same pid and the same
// tag would have to start 2^32 clock ticks (497 days at 100 Hz) apart.
func (p Proc) Tag() uint32 { return uint32(p.Start) }

func (p Proc) String() string { return fmt.Sprintf("pid %d (start %d)", p.PID, p.Start) }
