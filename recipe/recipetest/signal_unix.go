//go:build unix

package recipetest

import (
	"os"
	"syscall"
)

// pause and resume stop and continue a helper process (SIGSTOP, SIGCONT).
func pause(p *os.Process) error  { return p.Signal(syscall.SIGSTOP) }
func resume(p *os.Process) error { return p.Signal(syscall.SIGCONT) }
