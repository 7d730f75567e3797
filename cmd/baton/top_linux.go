//go:build linux

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// keyboard reads single key presses from a terminal on stdin into keys,
// with the terminal's line editing and echo off until restore.
func keyboard(keys chan<- byte) (restore func(), ok bool) {
	fd := int(os.Stdin.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, false
	}
	raw := *old
	raw.Lflag &^= unix.ICANON | unix.ECHO
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, false
	}
	go func() {
		var b [1]byte
		for {
			n, err := os.Stdin.Read(b[:])
			if err != nil {
				return
			}
			if n == 1 {
				select {
				case keys <- b[0]:
				default:
				}
			}
		}
	}()
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }, true
}
