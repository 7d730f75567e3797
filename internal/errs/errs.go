// Package errs holds the values of baton's sentinel errors, so that the root
// package and the driver package share them without importing each other.
package errs

import (
	"errors"
	"fmt"
)

var (
	NotHeld         = errors.New("baton: not held")
	Lost            = errors.New("baton: hold lost")
	Locked          = errors.New("baton: locked")
	Closed          = errors.New("baton: closed")
	InvalidName     = errors.New("baton: invalid name")
	InvalidArgument = errors.New("baton: invalid argument")
	Upgrade         = errors.New("baton: read-to-write upgrade refused")
	Mismatch        = errors.New("baton: parameters differ from the existing object")
	Conflict        = errors.New("baton: version conflict")
)

// MismatchError is an error matching Mismatch that names the parameter of
// the existing object and the one asked for.
type MismatchError struct {
	Param string // what differs: "capacity"
	Have  int64  // the existing object's; 0 when the backend could not tell
	Want  int64  // the caller's
	Err   error  // the backend's report, for errors.Is and As; its text is not repeated
}

func (e *MismatchError) Error() string {
	if e.Have > 0 {
		return fmt.Sprintf("exists with %s %d, not %d", e.Param, e.Have, e.Want)
	}
	return fmt.Sprintf("exists with a %s other than %d", e.Param, e.Want)
}

func (e *MismatchError) Unwrap() []error {
	if e.Err == nil {
		return []error{Mismatch}
	}
	return []error{Mismatch, e.Err}
}
