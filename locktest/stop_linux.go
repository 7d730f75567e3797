package locktest

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Stop sends SIGSTOP to the process and returns once the kernel shows it
// stopped (or after a second), so that what the caller reads of its
// shared state afterwards cannot change until it is continued or killed.
func Stop(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return err
	}
	stat := "/proc/" + strconv.Itoa(pid) + "/stat"
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		b, err := os.ReadFile(stat)
		if err != nil {
			return err
		}
		// The state follows the command name, which is in parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return nil
		}
		time.Sleep(100 * time.Microsecond)
	}
	return nil
}

// CPUTime returns the CPU time the threads of process pid have used, from
// /proc/PID/task/*/schedstat (nanoseconds; /proc/PID/stat counts ticks of
// 10 ms, too coarse to judge an idle process).
func CPUTime(pid int) (time.Duration, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, e := range tasks {
		b, err := os.ReadFile(dir + "/" + e.Name() + "/schedstat")
		if err != nil {
			continue // a thread that ended
		}
		f := bytes.Fields(b)
		if len(f) == 0 {
			continue
		}
		ns, _ := strconv.ParseInt(string(f[0]), 10, 64)
		sum += time.Duration(ns)
	}
	return sum, nil
}
