package baton_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMain fails the package when its tests and examples leave a System V
// semaphore set behind: a set whose last operation was this process's is
// one it made and did not remove. (Other packages' sets, made while this
// one runs, carry their own pids.)
func TestMain(m *testing.M) {
	code := m.Run()
	if left := setsTouchedBy(os.Getpid()); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "System V semaphore sets left behind: %v\n", left)
		code = 1
	}
	os.Exit(code)
}

// semGetPID is semctl's GETPID command (linux/sem.h).
const semGetPID = 11

func setsTouchedBy(pid int) []int {
	b, err := os.ReadFile("/proc/sysvipc/sem")
	if err != nil {
		return nil
	}
	var out []int
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		id, err1 := strconv.Atoi(f[1])
		n, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil {
			continue
		}
		for i := range n {
			r, _, e := unix.Syscall6(unix.SYS_SEMCTL, uintptr(id), uintptr(i), semGetPID, 0, 0, 0)
			if e == 0 && int(r) == pid {
				out = append(out, id)
				break
			}
		}
	}
	return out
}
