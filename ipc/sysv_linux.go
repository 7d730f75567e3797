//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package ipc

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton"
)

// semctl commands (linux/sem.h); x/sys does not define them.
const (
	semGETPID  = 11
	semGETVAL  = 12
	semGETNCNT = 14
	semGETZCNT = 15
)

// SemSet is a System V semaphore set, identified by its kernel id. The zero
// value is not usable; sets come from the registry (OpenSemObject) or from
// CreateSemSet. A SemSet is a plain id: copying it is fine and it holds no
// resource of the process.
type SemSet struct {
	id    int
	nsems int
}

// ID returns the kernel id of the set.
func (s *SemSet) ID() int { return s.id }

// NSems returns the number of semaphores in the set.
func (s *SemSet) NSems() int { return s.nsems }

// CreateSemSet creates a new set of nsems semaphores, all zero, with
// permission bits 0600 and a fresh random key that no other set has (the
// key is never derived from a path, so it cannot collide with ftok users).
// Nothing has operated on the set yet: its OTime is 0.
func CreateSemSet(nsems int) (*SemSet, int32, error) {
	for range 64 {
		key := randomKey()
		id, err := createSemSetKey(key, nsems)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		return &SemSet{id: id, nsems: nsems}, key, nil
	}
	return nil, 0, fmt.Errorf("ipc: semget: no free key after 64 tries: %w", unix.EEXIST)
}

// createSemSetKey creates a set of nsems semaphores with key, which must
// be free: an error matching unix.EEXIST says it is not.
func createSemSetKey(key int32, nsems int) (int, error) {
	if nsems <= 0 || nsems > 0xffff {
		return 0, fmt.Errorf("%w: %d semaphores in a set", baton.ErrInvalidArgument, nsems)
	}
	r, _, e := unix.Syscall(unix.SYS_SEMGET, uintptr(key), uintptr(nsems), uintptr(unix.IPC_CREAT|unix.IPC_EXCL|0o600))
	switch e {
	case 0:
		return int(r), nil
	case unix.EINVAL:
		return 0, fmt.Errorf("%w: ipc: semget of %d semaphores: more than the system allows per set (kernel.sem SEMMSL): %w", baton.ErrInvalidArgument, nsems, e)
	case unix.ENOSPC:
		return 0, fmt.Errorf("ipc: semget: the system limit of semaphore sets or semaphores is reached (kernel.sem SEMMNI/SEMMNS; see ipcs -s): %w", e)
	default:
		return 0, fmt.Errorf("ipc: semget: %w", e)
	}
}

// semSetByKey returns the id of the set with key, if there is one.
func semSetByKey(key int32) (int, bool) {
	r, _, e := unix.Syscall(unix.SYS_SEMGET, uintptr(key), 0, 0)
	return int(r), e == 0
}

// randomKey returns a random key other than IPC_PRIVATE (0).
func randomKey() int32 {
	var b [4]byte
	for {
		_, _ = rand.Read(b[:])
		if k := int32(binary.LittleEndian.Uint32(b[:])); k != 0 {
			return k
		}
	}
}

func semtimedop(id int, ops []SemOp, ts *unix.Timespec) unix.Errno {
	_, _, e := unix.Syscall6(unix.SYS_SEMTIMEDOP, uintptr(id), uintptr(unsafe.Pointer(unsafe.SliceData(ops))), uintptr(len(ops)), uintptr(unsafe.Pointer(ts)), 0, 0)
	return e
}

// semErr turns an errno of semop into an error of this package.
func semErr(id int, e unix.Errno) error {
	switch e {
	case 0:
		return nil
	case unix.EAGAIN:
		return ErrWouldBlock
	case unix.EIDRM, unix.EINVAL:
		return fmt.Errorf("%w (semaphore set %d): %w", ErrRemoved, id, e)
	case unix.ERANGE:
		return fmt.Errorf("%w: ipc: semop on set %d: the value would pass %d (SEMVMX) or its undo record would overflow: %w", baton.ErrInvalidArgument, id, SemValueMax, e)
	case unix.E2BIG, unix.EFBIG:
		return fmt.Errorf("%w: ipc: semop on set %d: too many operations or index out of range: %w", baton.ErrInvalidArgument, id, e)
	case unix.ENOMEM:
		return fmt.Errorf("ipc: semop on set %d: no memory for the undo record: %w", id, e)
	case unix.EACCES:
		return fmt.Errorf("ipc: semop on set %d: permission denied: %w", id, e)
	default:
		return fmt.Errorf("ipc: semop on set %d: %w", id, e)
	}
}

// TryOp performs ops atomically without waiting: every op is given the
// NoWait flag, and if the set of ops cannot complete at once the call
// returns ErrWouldBlock and changes nothing. EINTR is retried (a semop that
// fails with EINTR has changed nothing).
func (s *SemSet) TryOp(ops []SemOp) error {
	for i := range ops {
		ops[i].Flags |= NoWait
	}
	for {
		e := semtimedop(s.id, ops, nil)
		if e != unix.EINTR {
			return semErr(s.id, e)
		}
	}
}

// Op performs ops atomically, waiting as long as needed, until ctx is done.
// On ctx done it returns an error matching ctx.Err() and has changed
// nothing. A set removed meanwhile gives ErrRemoved.
//
// The kernel never restarts semop after a signal handler ran, whatever
// SA_RESTART says, so a cancelled wait is ended by signalling the thread that
// waits (SIGURG, which the Go runtime already uses and tolerates anywhere):
// the wait ends within about a millisecond of the cancellation, and no
// polling happens while nothing is cancelled.
func (s *SemSet) Op(ctx context.Context, ops []SemOp) error {
	for i := range ops {
		ops[i].Flags &^= NoWait
	}
	return blocking(ctx, func() unix.Errno { return semtimedop(s.id, ops, nil) }, func(e unix.Errno) error { return semErr(s.id, e) })
}

// Do performs ops at once if it can; otherwise, with wait, it waits for
// them as Op does, and without, it returns ErrWouldBlock and changes
// nothing.
func (s *SemSet) Do(ctx context.Context, ops []SemOp, wait bool) error {
	err := s.TryOp(ops)
	if err != nil && wait && errors.Is(err, ErrWouldBlock) {
		err = s.Op(ctx, ops)
	}
	return err
}

// blocking runs call, a System V call that may sleep in the kernel, until it
// returns something other than EINTR or ctx is done.
func blocking(ctx context.Context, call func() unix.Errno, conv func(unix.Errno) error) error {
	if ctx.Done() == nil {
		for {
			if e := call(); e != unix.EINTR {
				return conv(e)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	k := &kicker{tid: unix.Gettid(), active: true}
	stop := context.AfterFunc(ctx, k.kick)
	defer func() {
		stop()
		k.mu.Lock()
		k.active = false // after this no signal is sent to the thread
		k.mu.Unlock()
	}()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e := call(); e != unix.EINTR {
			return conv(e)
		}
	}
}

// kicker interrupts a thread that sleeps in a System V call, until the
// waiter says it has left.
type kicker struct {
	mu     sync.Mutex
	tid    int
	active bool // guarded by mu: the waiter is still in its loop on tid
}

// kick signals the thread every millisecond until the waiter leaves. A signal
// that arrives just before the waiter enters the kernel is lost; the next
// one is not.
func (k *kicker) kick() {
	pid := unix.Getpid()
	for {
		k.mu.Lock()
		if !k.active {
			k.mu.Unlock()
			return
		}
		_ = unix.Tgkill(pid, k.tid, unix.SIGURG)
		k.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
}

func semctl(id, num, cmd int, arg uintptr) (int, unix.Errno) {
	r, _, e := unix.Syscall6(unix.SYS_SEMCTL, uintptr(id), uintptr(num), uintptr(cmd), arg, 0, 0)
	return int(r), e
}

func (s *SemSet) get(cmd, num int) (int, error) {
	if num < 0 || num >= s.nsems {
		return 0, fmt.Errorf("%w: semaphore %d of a set of %d", baton.ErrInvalidArgument, num, s.nsems)
	}
	r, e := semctl(s.id, num, cmd, 0)
	if e != 0 {
		return 0, semErr(s.id, e)
	}
	return r, nil
}

// Value returns the value of semaphore num (GETVAL).
func (s *SemSet) Value(num int) (int, error) { return s.get(semGETVAL, num) }

// Waiting returns how many operations wait for semaphore num to grow
// (GETNCNT) and how many wait for it to be zero (GETZCNT).
func (s *SemSet) Waiting(num int) (ncnt, zcnt int, err error) {
	if ncnt, err = s.get(semGETNCNT, num); err != nil {
		return 0, 0, err
	}
	zcnt, err = s.get(semGETZCNT, num)
	return ncnt, zcnt, err
}

// LastPID returns the pid of the process that last operated on semaphore
// num (GETPID), 0 if none did.
func (s *SemSet) LastPID(num int) (int, error) { return s.get(semGETPID, num) }

// semidOff* are offsets in struct semid64_ds, which differs between x86-64
// and the generic 64-bit layout only in the padding after the times.
const semidOTime = 48

// Stat returns IPC_STAT of the set.
func (s *SemSet) Stat() (SemStat, error) { return StatSemSet(s.id) }

// StatSemSet returns IPC_STAT of the set id.
func StatSemSet(id int) (SemStat, error) {
	var buf [32]uint64 // larger than struct semid64_ds, 8-byte aligned
	if _, e := semctl(id, 0, unix.IPC_STAT, uintptr(unsafe.Pointer(&buf))); e != 0 {
		return SemStat{}, semErr(id, e)
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&buf)), len(buf)*8)
	perm := (*unix.SysvIpcPerm)(unsafe.Pointer(&buf))
	st := SemStat{
		Key:   perm.Key,
		UID:   perm.Uid,
		CUID:  perm.Cuid,
		Mode:  perm.Mode & 0o777,
		OTime: int64(binary.NativeEndian.Uint64(b[semidOTime:])),
		CTime: int64(binary.NativeEndian.Uint64(b[semidCTime:])),
		NSems: int(binary.NativeEndian.Uint64(b[semidNSems:])),
	}
	return st, nil
}

// Remove removes the set (IPC_RMID). Processes waiting on it wake with
// ErrRemoved.
func (s *SemSet) Remove() error { return removeSemSet(s.id) }

func removeSemSet(id int) error {
	if _, e := semctl(id, 0, unix.IPC_RMID, 0); e != 0 {
		return semErr(id, e)
	}
	return nil
}

// OpenSemSetID returns the set with kernel id id after checking with
// IPC_STAT that it exists.
func OpenSemSetID(id int) (*SemSet, error) {
	st, err := StatSemSet(id)
	if err != nil {
		return nil, err
	}
	return &SemSet{id: id, nsems: st.NSems}, nil
}

// isRemoved reports whether err says the object is gone.
func isRemoved(err error) bool { return errors.Is(err, ErrRemoved) }
