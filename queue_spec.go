package baton

import (
	"fmt"
	"time"

	"github.com/batonlock/baton/driver"
)

// PutSpec validates a job as Queue.Put does, with maxPayload the backend's
// payload limit, and returns it for a driver. It is for backends that put
// jobs outside a Queue handle (in a caller's own database transaction, say):
// the checks and errors are those of Put.
func PutSpec(payload []byte, maxPayload int, opts ...PutOption) (driver.PutJob, error) {
	if payload == nil {
		return driver.PutJob{}, fmt.Errorf("%w: nil payload (use []byte{} for an empty one)", ErrInvalidArgument)
	}
	if len(payload) > maxPayload {
		return driver.PutJob{}, fmt.Errorf("%w: %d bytes of payload, more than %d", ErrInvalidArgument, len(payload), maxPayload)
	}
	if len(opts) == 0 {
		return driver.PutJob{Payload: payload, MaxAttempts: DefaultMaxAttempts}, nil
	}
	p, err := putOptions(opts)
	if err != nil {
		return driver.PutJob{}, err
	}
	j := driver.PutJob{Payload: payload, MaxAttempts: p.attempts}
	switch {
	case p.hasDelay && p.hasAt:
		return j, fmt.Errorf("%w: both Delay and ReadyAt", ErrInvalidArgument)
	case p.hasDelay && p.delay < 0:
		return j, fmt.Errorf("%w: negative delay %v", ErrInvalidArgument, p.delay)
	case p.hasDelay && p.delay > 0:
		j.At = time.Now().Add(p.delay)
	case p.hasAt && p.at.IsZero():
		return j, fmt.Errorf("%w: zero ReadyAt time", ErrInvalidArgument)
	case p.hasAt:
		j.At = p.at
	}
	if j.At.After(maxReadyAt) {
		return j, fmt.Errorf("%w: ready at %v, after %v", ErrInvalidArgument, j.At, maxReadyAt)
	}
	if p.attempts < 1 || p.attempts > MaxJobAttempts {
		return j, fmt.Errorf("%w: MaxAttempts %d, must be in 1..%d", ErrInvalidArgument, p.attempts, MaxJobAttempts)
	}
	if p.hasKey {
		if p.key == "" || len(p.key) > MaxJobKeyLen {
			return j, fmt.Errorf("%w: key of %d bytes, must be 1..%d", ErrInvalidArgument, len(p.key), MaxJobKeyLen)
		}
		j.Key = p.key
	}
	return j, nil
}

// putOptions applies opts to the defaults. Apart from PutSpec, so that a
// Put without options does not pay for the spec the options write to.
func putOptions(opts []PutOption) (*putSpec, error) {
	p := &putSpec{attempts: DefaultMaxAttempts}
	for _, o := range opts {
		if o.set == nil {
			return nil, fmt.Errorf("%w: zero PutOption", ErrInvalidArgument)
		}
		if err := o.set(p); err != nil {
			return nil, err
		}
	}
	return p, nil
}
