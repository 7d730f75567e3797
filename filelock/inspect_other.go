//go:build !linux

package filelock

import "github.com/batonlock/baton"

// State describes a lock file.
type State struct {
	Holders   []baton.Holder
	LastToken baton.Token
}

// Inspect returns an error matching errors.ErrUnsupported on this system.
func Inspect(path string) (State, error) { return State{}, unsupported(path) }
