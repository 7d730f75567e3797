//go:build linux

package locktest

import (
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// Mono returns CLOCK_MONOTONIC in ns: one clock for every process of the
// machine, so holds recorded by different processes can be compared.
func Mono() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// openFDs counts the open file descriptors of the process, except those
// open on one of the files named in skip (absolute paths).
func openFDs(skip ...string) int {
	ents, err := readDirNames("/proc/self/fd")
	if err != nil {
		return -1
	}
	n := len(ents) - 1 // the directory read itself
	for _, e := range ents {
		if len(skip) == 0 {
			break
		}
		if target, err := os.Readlink("/proc/self/fd/" + e); err == nil && slices.Contains(skip, target) {
			n--
		}
	}
	return n
}

// fdTargets lists what the process's open fds refer to, for a leak report.
func fdTargets() []string {
	ents, err := readDirNames("/proc/self/fd")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e); err == nil {
			out = append(out, e+" -> "+target)
		}
	}
	return out
}
