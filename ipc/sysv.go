package ipc

import (
	"errors"
	"fmt"

	"github.com/batonlock/baton"
)

// SemOp is one operation of a semop call; its layout is the kernel's struct
// sembuf. Op > 0 adds to the semaphore, Op < 0 waits until the value is at
// least -Op and subtracts it, Op == 0 waits until the value is zero.
type SemOp struct {
	Num   uint16 // index of the semaphore in the set
	Op    int16
	Flags int16 // SemUndo, NoWait
}

// Flags of a SemOp.
const (
	// SemUndo makes the kernel reverse the operation when the process
	// exits, whatever the cause (SIGKILL included).
	SemUndo int16 = 0x1000
	// NoWait makes an operation that would block fail with ErrWouldBlock.
	NoWait int16 = 0x800
)

// SemValueMax is the largest value a System V semaphore holds (SEMVMX).
const SemValueMax = 32767

// ErrWouldBlock is returned by operations asked not to wait (NoWait) when
// they would have had to.
var ErrWouldBlock = fmt.Errorf("ipc: operation would block: %w", baton.ErrLocked)

// ErrRemoved reports that a System V object was removed (IPC_RMID, ipcrm)
// while it was in use. Holds taken in it are gone with it.
var ErrRemoved = fmt.Errorf("ipc: System V object removed: %w", baton.ErrLost)

// SemStat is what IPC_STAT tells of a semaphore set.
type SemStat struct {
	Key   int32
	UID   uint32 // owner
	CUID  uint32 // creator
	Mode  uint32 // permission bits
	OTime int64  // last semop, Unix seconds; 0 until the first semop
	CTime int64  // last change, Unix seconds
	NSems int
}

// MsgStat is what IPC_STAT tells of a message queue.
type MsgStat struct {
	Key    int32
	UID    uint32
	CUID   uint32
	Mode   uint32
	QNum   int // messages in the queue
	QBytes int // capacity of the queue in bytes
	CBytes int // bytes in the queue
	LSPid  int // last sender
	LRPid  int // last receiver
}

// errUnsupported is what every System V call returns on platforms without
// the wrappers.
var errUnsupported = fmt.Errorf("ipc: System V IPC on this platform: %w", errors.ErrUnsupported)
