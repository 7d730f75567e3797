package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/batonlock/baton"
)

// Taking what a run or sem invocation asks for.

// signalCause is the cancellation cause of a wait ended by a signal.
type signalCause struct{ sig os.Signal }

func (s signalCause) Error() string { return "interrupted by " + s.sig.String() }

var errTimedOut = errors.New("timed out")

// held is an acquired lock or semaphore slot.
type held struct {
	hold    baton.Hold
	release func(context.Context) error
}

func describe(r *request) string {
	switch {
	case r.file != "":
		return fmt.Sprintf("the file lock %s", r.file)
	case r.waitAll:
		return fmt.Sprintf("all %d slots of semaphore %q", r.sem, r.name)
	case r.sem > 0:
		return fmt.Sprintf("a slot of semaphore %q (%d slots)", r.name, r.sem)
	case r.shared:
		return fmt.Sprintf("the shared lock %q", r.name)
	default:
		return fmt.Sprintf("the exclusive lock %q", r.name)
	}
}

// acquire takes what r asks for. On error it holds nothing.
func acquire(ctx context.Context, b baton.Backend, r *request) (held, error) {
	if r.sem > 0 {
		s, err := b.Semaphore(ctx, r.name, r.sem)
		if err != nil {
			return held{}, err
		}
		var h baton.Hold
		if r.nonblock {
			h, err = s.TryAcquire(ctx, r.permits)
		} else {
			h, err = s.Acquire(ctx, r.permits)
		}
		if err != nil {
			_ = s.Close()
			return held{}, err
		}
		return held{hold: h, release: func(c context.Context) error {
			err := s.Release(c, r.permits)
			return errors.Join(err, s.Close())
		}}, nil
	}
	m, err := b.RWMutex(ctx, r.name)
	if err != nil && !r.shared && errors.Is(err, baton.ErrUnsupported) {
		// A backend without read-write locks (Redlock) serves -x with its
		// Mutex; every baton on that backend does the same.
		return lockMutex(ctx, b, r)
	}
	if err != nil {
		return held{}, err
	}
	var h baton.Hold
	switch {
	case r.shared && r.nonblock:
		h, err = m.TryRLock(ctx)
	case r.shared:
		h, err = m.RLock(ctx)
	case r.nonblock:
		h, err = m.TryLock(ctx)
	default:
		h, err = m.Lock(ctx)
	}
	if err != nil {
		_ = m.Close()
		return held{}, err
	}
	unlock := m.Unlock
	if r.shared {
		unlock = m.RUnlock
	}
	return held{hold: h, release: func(c context.Context) error {
		err := unlock(c)
		return errors.Join(err, m.Close())
	}}, nil
}

// lockMutex takes the Mutex NAME, for backends without RWMutex.
func lockMutex(ctx context.Context, b baton.Backend, r *request) (held, error) {
	m, err := b.Mutex(ctx, r.name)
	if err != nil {
		return held{}, err
	}
	var h baton.Hold
	if r.nonblock {
		h, err = m.TryLock(ctx)
	} else {
		h, err = m.Lock(ctx)
	}
	if err != nil {
		_ = m.Close()
		return held{}, err
	}
	return held{hold: h, release: func(c context.Context) error {
		return errors.Join(m.Unlock(c), m.Close())
	}}, nil
}

// classify turns a backend error into an exit error.
func classify(err error) error {
	switch {
	case errors.Is(err, baton.ErrInvalidName), errors.Is(err, baton.ErrInvalidArgument), errors.Is(err, baton.ErrMismatch):
		return exitWith(exitUsage, err)
	default:
		return exitWith(exitBackend, err)
	}
}

// probe asks the backend about the object r waits for, alongside the wait,
// and reports whether the backend answered: a wait that -w ends is "busy"
// only when the backend answered meanwhile, and a failure of the backend
// otherwise. A backend that cannot be asked counts as answering.
// probeAtLeast is the least time the backend gets to answer the probe.
const probeAtLeast = 2 * time.Second

func probe(ctx context.Context, b baton.Backend, r *request) <-chan bool {
	c := make(chan bool, 1)
	in, ok := b.(baton.Inspector)
	if !ok {
		c <- true
		return c
	}
	kinds := []baton.Kind{baton.KindRWMutex, baton.KindMutex} // the Mutex where there is no RWMutex (Redlock)
	if r.sem > 0 {
		kinds = []baton.Kind{baton.KindSemaphore}
	}
	go func() {
		var err error
		for _, k := range kinds {
			if _, err = in.Inspect(ctx, k, r.name); !errors.Is(err, baton.ErrUnsupported) {
				break
			}
		}
		c <- err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, baton.ErrUnsupported)
	}()
	return c
}

// hostsOf returns the host list of a network backend URL ("" for others).
func hostsOf(raw string) string {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		rest = rest[at+1:]
	}
	return rest
}
