//go:build linux

package filelock

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// State describes a lock file as the kernel and its page tell it.
type State struct {
	Holders   []baton.Holder // from /proc/locks: pid and mode of each flock on the file
	LastToken baton.Token
}

// Inspect reports who holds flock locks on the file at path (from
// /proc/locks, which lists the holders' pids) and the last fencing token
// given. It opens the file read-only and takes no lock. The exclusive
// holder's acquisition time comes from the file's page.
func Inspect(path string) (State, error) {
	f, err := os.Open(path)
	if err != nil {
		return State{}, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return State{}, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	var pg [32]byte
	n, _ := f.ReadAt(pg[:], 0)
	var s State
	var exPID int64
	var since time.Time
	if n == len(pg) {
		s.LastToken = baton.Token(binary.NativeEndian.Uint64(pg[8:]))
		exPID = int64(binary.NativeEndian.Uint64(pg[16:]))
		if ns := int64(binary.NativeEndian.Uint64(pg[24:])); ns > 0 {
			since = time.Unix(0, ns)
		}
	}
	s.Holders, err = flockHolders(uint64(st.Dev), st.Ino)
	if err != nil {
		return s, err
	}
	for i := range s.Holders {
		if s.Holders[i].Mode == driver.Exclusive.String() && int64(s.Holders[i].PID) == exPID {
			s.Holders[i].Since = since
			s.Holders[i].Token = s.LastToken
		}
	}
	return s, nil
}

// flockHolders lists the granted flock locks on the file dev/ino. The
// kernel hands /proc/locks out a page per read, and locks taken or dropped
// between two pages shift its lines, so a read of a long list can show a
// line twice or miss one. The answer is the union of a few reads, a
// process listed once per mode: one that holds the file twice in a mode
// (two descriptors) cannot be told from a line read twice.
func flockHolders(dev, ino uint64) ([]baton.Holder, error) {
	var hs []baton.Holder
	for range procLocksReads {
		locks, err := os.ReadFile("/proc/locks")
		if err != nil {
			return nil, fmt.Errorf("filelock: %w", err)
		}
		forEachHolder(locks, dev, ino, func(pid int, write bool) {
			mode := driver.Shared.String()
			if write {
				mode = driver.Exclusive.String()
			}
			if h := (baton.Holder{PID: pid, Mode: mode}); !slices.Contains(hs, h) {
				hs = append(hs, h)
			}
		})
	}
	return hs, nil
}

// procLocksReads is the number of reads of /proc/locks whose union
// answers: a holder missed by one torn read is seen by another.
const procLocksReads = 3
