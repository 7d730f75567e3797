//go:build !linux

package locktest

import "time"

var epoch = time.Now()

// Mono returns a monotonic time in ns; on this system it is comparable only
// within one process.
func Mono() int64 { return int64(time.Since(epoch)) }

func openFDs(skip ...string) int { return -1 }

func fdTargets() []string { return nil }
