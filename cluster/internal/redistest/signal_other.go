//go:build !unix

package redistest

import (
	"errors"
	"os"
)

// A process cannot be stopped and continued here.
func pause(*os.Process) error  { return errors.ErrUnsupported }
func resume(*os.Process) error { return errors.ErrUnsupported }
