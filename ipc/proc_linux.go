//go:build linux

package ipc

import (
	"errors"
	"fmt"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

var self struct {
	once sync.Once
	p    Proc
	err  error
}

// Self returns the identity of the calling process. It reads /proc once and
// caches the result.
func Self() (Proc, error) {
	self.once.Do(func() {
		pid := unix.Getpid()
		st, start, err := readStat(pid)
		switch {
		case err != nil:
			self.err = fmt.Errorf("ipc: own process identity: %w", err)
		case st == 0:
			self.err = fmt.Errorf("ipc: own process identity: /proc/%d/stat is missing", pid)
		default:
			self.p = Proc{PID: pid, Start: start}
		}
	})
	return self.p, self.err
}

// LookupProc returns the identity of the process that has pid now and its
// state letter from /proc/PID/stat ('R', 'S', 'D', 'Z' for a zombie, ...).
// ok is false when no process has pid.
func LookupProc(pid int) (p Proc, state byte, ok bool, err error) {
	if pid <= 0 {
		return Proc{}, 0, false, nil
	}
	st, start, err := readStat(pid)
	if err != nil || st == 0 {
		return Proc{}, 0, false, err
	}
	return Proc{PID: pid, Start: start}, st, true, nil
}

// Alive reports whether p still runs: a process with p's pid exists, has
// p's start time (it is not a later process that got the pid again) and is
// neither exiting, a zombie nor dead. A zombie counts as dead even though kill(pid, 0)
// still succeeds on it: it will never run again.
func (p Proc) Alive() (bool, error) {
	st, flags, start, err := readStatFlags(p.PID)
	if err != nil {
		return false, err
	}
	return !dying(st, flags) && start == p.Start, nil
}

// AliveTag is Alive for a process known only by pid and Tag.
func AliveTag(pid int, tag uint32) (bool, error) {
	st, flags, start, err := readStatFlags(pid)
	if err != nil {
		return false, err
	}
	return !dying(st, flags) && uint32(start) == tag, nil
}

// readStat returns the state letter and the start time of pid; state 0
// means there is no such process.
func readStat(pid int) (state byte, start uint64, err error) {
	state, _, start, err = readStatFlags(pid)
	return state, start, err
}

// dying reports whether a process in state with kernel flags will never run
// user code again.
func dying(state byte, flags uint64) bool {
	return state == 0 || state == 'Z' || state == 'X' || flags&pfExiting != 0
}

func readStatFlags(pid int) (state byte, flags, start uint64, err error) {
	if pid <= 0 {
		return 0, 0, 0, nil
	}
	var pathBuf [32]byte
	path := append(pathBuf[:0], "/proc/"...)
	path = strconv.AppendInt(path, int64(pid), 10)
	path = append(path, "/stat"...)
	var buf [1024]byte
	fd, err := unix.Open(string(path), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
		return 0, 0, 0, nil
	}
	if err != nil {
		return 0, 0, 0, fmt.Errorf("ipc: %s: %w", path, err)
	}
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if errors.Is(err, unix.ESRCH) {
			unix.Close(fd)
			return 0, 0, 0, nil
		}
		if err != nil {
			unix.Close(fd)
			return 0, 0, 0, fmt.Errorf("ipc: %s: %w", path, err)
		}
		if m == 0 {
			break
		}
		n += m
	}
	unix.Close(fd)
	return parseStatFlags(buf[:n])
}

// parseStat extracts the state (field 3) and starttime (field 22) of a
// /proc/PID/stat line. The command name (field 2) is in parentheses and may
// hold spaces and parentheses itself, so fields are counted from the last ')'.
func parseStat(b []byte) (state byte, start uint64, err error) {
	state, _, start, err = parseStatFlags(b)
	return state, start, err
}

// pfExiting is the kernel's PF_EXITING task flag: the task is in exit(2) or
// being killed. It is set on the thread-group leader as soon as a fatal
// signal reaches it, before the address space is torn down, which may take
// milliseconds more.
const pfExiting = 0x4

// sigkillBit is SIGKILL in the pending-signal bitmap of /proc/PID/stat
// (field 31). A pending SIGKILL cannot be caught, blocked or survived: the
// process is dead from the moment kill(2) returns, even before it runs.
const sigkillBit = 1 << (9 - 1)

// parseStatFlags is parseStat that also returns the kernel flags word
// (field 9), with pfExiting also set when SIGKILL is pending (field 31).
func parseStatFlags(b []byte) (state byte, flags uint64, start uint64, err error) {
	end := -1
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' {
			end = i
			break
		}
	}
	if end < 0 || end+3 >= len(b) {
		return 0, 0, 0, fmt.Errorf("ipc: malformed /proc stat line %q", b)
	}
	rest := b[end+2:]
	state = rest[0]
	// rest holds fields 3, 4, ...: flags (field 9) is the 7th of rest,
	// starttime (field 22) the 20th and the pending signals (field 31) the
	// 29th.
	bad := fmt.Errorf("ipc: malformed /proc stat line %q", b)
	field := 1
	seen := 0
	for i := 0; i < len(rest) && field < 29; i++ {
		if rest[i] != ' ' {
			continue
		}
		field++
		var v uint64
		switch field {
		case 7, 20, 29:
			if v, err = leadingUint(rest[i+1:]); err != nil {
				return 0, 0, 0, bad
			}
			seen++
		}
		switch field {
		case 7:
			flags |= v
		case 20:
			start = v
		case 29:
			if v&sigkillBit != 0 {
				flags |= pfExiting
			}
		}
	}
	if seen < 2 || field < 20 {
		return 0, 0, 0, bad
	}
	return state, flags, start, nil
}

func leadingUint(b []byte) (uint64, error) {
	j := 0
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	return strconv.ParseUint(string(b[:j]), 10, 64)
}

// ProcWatch follows one process through an open /proc/PID/stat, so that each
// check is one read: the open file keeps referring to that process and
// fails with ESRCH once it has been reaped, even if its pid is reused. The
// zero value is not usable; use WatchProc. A ProcWatch is not safe for
// concurrent use.
type ProcWatch struct {
	fd  int
	key procKey // the process watched
}

// WatchProc starts watching the process that has pid and whose start time
// has the low 32 bits tag. dead is true (and w nil) when there is no such
// process, or it is exiting already (see Dead).
func WatchProc(pid int, tag uint32) (w *ProcWatch, dead bool, err error) {
	return watchProc(procKey{pid: pid, tag: tag, mask: fullTag})
}

func watchProc(k procKey) (w *ProcWatch, dead bool, err error) {
	pid := k.pid
	if pid <= 0 {
		return nil, true, nil
	}
	var pathBuf [32]byte
	path := append(pathBuf[:0], "/proc/"...)
	path = strconv.AppendInt(path, int64(pid), 10)
	path = append(path, "/stat"...)
	fd, err := openNoEINTR(string(path), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("ipc: %s: %w", path, err)
	}
	w = &ProcWatch{fd: fd, key: k}
	dead, err = w.Dead()
	if dead || err != nil {
		w.Close()
		return nil, dead, err
	}
	return w, false, nil
}

// Dead reports whether the watched process has died or will: it was reaped,
// is a zombie, is exiting (a fatal signal reached it: it will never run user
// code again), or is not the process of the recorded start time.
//
// Processes are judged by their main thread: a program whose main thread
// exits while other threads go on (possible in C, never in Go) counts as
// dead.
func (w *ProcWatch) Dead() (bool, error) {
	var buf [1024]byte
	n, err := preadFull(w.fd, buf[:])
	if errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("ipc: /proc/%d/stat: %w", w.key.pid, err)
	}
	st, flags, start, err := parseStatFlags(buf[:n])
	if err != nil {
		return false, err
	}
	return dying(st, flags) || !w.key.is(start), nil
}

// Close stops watching.
func (w *ProcWatch) Close() error {
	if w == nil || w.fd < 0 {
		return nil
	}
	err := unix.Close(w.fd)
	w.fd = -1
	return err
}

func preadFull(fd int, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := unix.Pread(fd, buf[n:], int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n, nil
}

// Outlived reports whether self, a process looking at a slot of shared
// memory, can tell that the process pid whose start time has the low 32
// bits tag has died: pid 0 names nobody, and self's own pid with another
// tag is an earlier process with that pid. Errors count as alive, since
// taking a live holder's share is worse than waiting.
func (self Proc) Outlived(pid int, tag uint32) bool {
	return self.OutlivedTag(pid, tag, fullTag)
}

// OutlivedTag is Outlived for a tag that holds only the bits mask of the
// start time's low 32 bits.
func (self Proc) OutlivedTag(pid int, tag, mask uint32) bool {
	if pid == 0 {
		return false
	}
	if pid == self.PID {
		return tag&mask != self.Tag()&mask
	}
	w, dead, err := watchProc(procKey{pid: pid, tag: tag & mask, mask: mask})
	if err != nil {
		return false
	}
	w.Close()
	return dead
}
