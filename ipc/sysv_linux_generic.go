//go:build linux && (arm64 || riscv64 || loong64)

package ipc

// Offsets in the generic 64-bit struct semid64_ds.
const (
	semidCTime = 56
	semidNSems = 64
)
