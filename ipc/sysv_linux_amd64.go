//go:build linux

package ipc

// Offsets in struct semid64_ds on x86-64, which keeps a padding word after
// each time.
const (
	semidCTime = 64
	semidNSems = 80
)
