//go:build linux

package main

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// caughtSignals are the signals baton handles itself: while it waits they
// end the wait (nothing is held, exit 128+S); while the command runs they
// are forwarded to it.
var caughtSignals = []os.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2}

func isTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}

// inForeground reports whether baton runs in the foreground process group
// of the terminal on its standard input, output or error. Then the terminal
// itself delivers Ctrl-C, Ctrl-\ and hangup to the command, which shares
// baton's process group, and baton does not send them a second time.
func inForeground() bool {
	for fd := range 3 {
		if !isTerminal(fd) {
			continue
		}
		pg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		if err != nil {
			continue
		}
		return pg == unix.Getpgrp()
	}
	return false
}

// sysProcAttr starts the command in a process group of its own when
// newGroup is set (so that a loss stops its whole tree), and has the kernel
// kill it if baton dies: the lock goes with baton, so must the command.
func sysProcAttr(newGroup bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: newGroup, Pdeathsig: syscall.SIGKILL}
}

// signalChild sends sig to the command, or to its whole process group.
func signalChild(p *os.Process, sig os.Signal, group bool) error {
	s, ok := sig.(syscall.Signal)
	if group && ok {
		return syscall.Kill(-p.Pid, s)
	}
	return p.Signal(sig)
}

// fromTerminal reports whether the terminal sends sig to the whole
// foreground process group by itself.
func fromTerminal(sig os.Signal) bool {
	return sig == unix.SIGINT || sig == unix.SIGQUIT || sig == unix.SIGHUP
}

// exitStatus is the shell's view of how the command ended: its exit status,
// or 128+S when signal S killed it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// signalExit is the exit code for a wait ended by sig.
func signalExit(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 128 + int(unix.SIGINT)
}

var (
	sigTerm os.Signal = unix.SIGTERM
	sigKill os.Signal = unix.SIGKILL
)
