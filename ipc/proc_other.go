//go:build !linux

package ipc

import (
	"errors"
	"fmt"
)

var errNoProc = fmt.Errorf("ipc: process identity: %w", errors.ErrUnsupported)

// Self returns an error matching errors.ErrUnsupported on this system.
func Self() (Proc, error) { return Proc{}, errNoProc }

// LookupProc returns an error matching errors.ErrUnsupported on this system.
func LookupProc(pid int) (p Proc, state byte, ok bool, err error) {
	return Proc{}, 0, false, errNoProc
}

// Alive returns an error matching errors.ErrUnsupported on this system.
func (p Proc) Alive() (bool, error) { return false, errNoProc }

// AliveTag returns an error matching errors.ErrUnsupported on this system.
func AliveTag(pid int, tag uint32) (bool, error) { return false, errNoProc }

// Outlived reports false on this system: no process can be seen dead.
func (self Proc) Outlived(pid int, tag uint32) bool { return false }

// OutlivedTag reports false on this system, as Outlived does.
func (self Proc) OutlivedTag(pid int, tag, mask uint32) bool { return false }
