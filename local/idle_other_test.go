//go:build !linux

package local_test

// idleChild is started only by the Linux idle tests.
func idleChild() int { return 2 }
