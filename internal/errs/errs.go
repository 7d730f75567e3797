// Package errs holds the values of baton's sentinel errors, so that the root
// package and the driver package share them without importing each other.
package errs

import "errors"

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
