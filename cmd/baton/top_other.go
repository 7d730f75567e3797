//go:build !linux

package main

// keyboard reads no keys on systems other than Linux.
func keyboard(keys chan<- byte) (restore func(), ok bool) { return nil, false }
