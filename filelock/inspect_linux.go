//go:build linux

package filelock

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
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

// flockHolders lists the granted flock locks on the file dev/ino.
func flockHolders(dev, ino uint64) ([]baton.Holder, error) {
	f, err := os.Open("/proc/locks")
	if err != nil {
		return nil, fmt.Errorf("filelock: %w", err)
	}
	defer f.Close()
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), ino)
	var hs []baton.Holder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF"; blocked
		// requests have "->" after the number and are not holders.
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || fs[1] != "FLOCK" || fs[5] != want {
			continue
		}
		pid, err := strconv.Atoi(fs[4])
		if err != nil {
			continue
		}
		mode := driver.Shared.String()
		if fs[3] == "WRITE" {
			mode = driver.Exclusive.String()
		}
		hs = append(hs, baton.Holder{PID: pid, Mode: mode})
	}
	return hs, sc.Err()
}
