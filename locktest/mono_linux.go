//go:build linux

package locktest

import "golang.org/x/sys/unix"

// Mono returns CLOCK_MONOTONIC in ns: one clock for every process of the
// machine, so holds recorded by different processes can be compared.
func Mono() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// openFDs counts the open file descriptors of the process.
func openFDs() int {
	ents, err := readDirNames("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents) - 1 // the directory read itself
}
