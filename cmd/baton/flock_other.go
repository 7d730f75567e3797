//go:build !unix

package main

import (
	"context"
	"errors"
)

var errNoFlock = exitWith(exitBackend, errors.New("flock(2) is not available on this system"))

func flockFile(context.Context, *request) (held, error) { return held{}, errNoFlock }

func lockFD(*runFlags, int) error { return errNoFlock }
