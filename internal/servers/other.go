//go:build !linux

package servers

import (
	"errors"
	"fmt"
)

// The servers run as processes of their own, started and stopped the
// Linux way (a process group, a parent-death signal, an unprivileged user
// for postgres); the embedded etcd runs anywhere.

func unsupported() (string, func(), error) {
	return "", nil, fmt.Errorf("starting a server process: %w", errors.ErrUnsupported)
}

func startRedis() (string, func(), error)     { return unsupported() }
func startPostgres() (string, func(), error)  { return unsupported() }
func startMariaDB() (string, func(), error)   { return unsupported() }
func startZooKeeper() (string, func(), error) { return unsupported() }
