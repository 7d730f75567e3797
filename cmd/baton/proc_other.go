//go:build !linux

package main

import (
	"os"
	"syscall"
)

// caughtSignals are the signals baton handles itself (see proc_linux.go).
var caughtSignals = []os.Signal{os.Interrupt}

func isTerminal(fd int) bool { return false }

func inForeground() bool { return false }

// sysProcAttr has nothing to add on systems other than Linux.
func sysProcAttr(newGroup bool) *syscall.SysProcAttr { return nil }

func signalChild(p *os.Process, sig os.Signal, group bool) error { return p.Signal(sig) }

func fromTerminal(sig os.Signal) bool { return false }

func exitStatus(ps *os.ProcessState) int { return ps.ExitCode() }

func signalExit(sig os.Signal) int { return 130 }

var (
	sigTerm os.Signal = os.Kill
	sigKill os.Signal = os.Kill
)
