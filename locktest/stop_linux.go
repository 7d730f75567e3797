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
