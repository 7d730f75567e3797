package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/condvar"
	"github.com/batonlock/baton/filelock"
	"github.com/batonlock/baton/local/mutex"
	"github.com/batonlock/baton/local/shmchan"
	"github.com/batonlock/baton/local/shmqueue"
	"github.com/batonlock/baton/rwlock"
	"github.com/batonlock/baton/rwlock/shmrw"
	"github.com/batonlock/baton/semaphore"
	"github.com/batonlock/baton/semaphore/shmsem"
)

// The driver implements baton.Inspector over every mechanism of the
// namespace, whatever the options of this Backend: a namespace may hold
// objects made by programs that chose other mechanisms.

func (d *backend) flockInfo(kind baton.Kind, dirKind, name string) (baton.Info, error) {
	p, err := d.ns.Path(dirKind, name)
	if err != nil {
		return baton.Info{}, err
	}
	st, err := filelock.Inspect(p)
	if err != nil {
		return baton.Info{}, err
	}
	return baton.Info{
		Name: name, Kind: kind, Backend: d.Kind(), Impl: "flock",
		Holders: st.Holders, Waiters: -1, LastToken: st.LastToken, Detail: p,
	}, nil
}

func (d *backend) List(ctx context.Context) ([]baton.Info, error) {
	var out []baton.Info
	var errs []error
	add := func(infos []baton.Info, err error) {
		if err != nil && !errors.Is(err, baton.ErrUnsupported) {
			errs = append(errs, err)
		}
		for _, in := range infos {
			in.Backend = d.Kind()
			out = append(out, in)
		}
	}
	add(mutex.List(d.ns))
	add(shmrw.List(d.ns))
	add(rwlock.List(d.ns))
	add(shmsem.List(d.ns))
	add(semaphore.List(d.ns))
	add(condvar.List(d.ns))
	add(shmqueue.List(d.ns))
	add(shmchan.List(d.ns))
	for _, k := range []struct {
		kind    baton.Kind
		dirKind string
	}{{baton.KindMutex, kindFlock}, {baton.KindRWMutex, kindRWFlock}} {
		names, err := d.ns.Names(k.dirKind)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, n := range names {
			in, err := d.flockInfo(k.kind, k.dirKind, n)
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, err)
				}
				continue
			}
			out = append(out, in)
		}
	}
	return out, errors.Join(errs...)
}

// Inspect reports on the object of kind called name, trying the
// mechanism this Backend uses first, then the other.
func (d *backend) Inspect(ctx context.Context, kind baton.Kind, name string) (baton.Info, error) {
	var tries []func() (baton.Info, error)
	switch kind {
	case baton.KindMutex:
		futex := func() (baton.Info, error) { return mutex.Inspect(d.ns, name) }
		flock := func() (baton.Info, error) { return d.flockInfo(kind, kindFlock, name) }
		tries = ordered(d.o.mutex == MutexFlock, futex, flock)
	case baton.KindRWMutex:
		shm := func() (baton.Info, error) { return shmrw.Inspect(d.ns, name) }
		sysv := func() (baton.Info, error) { return rwlock.Inspect(d.ns, name) }
		flock := func() (baton.Info, error) { return d.flockInfo(kind, kindRWFlock, name) }
		switch d.o.rw {
		case RWSysV:
			tries = append(tries, sysv, shm, flock)
		case RWFlock:
			tries = append(tries, flock, shm, sysv)
		default:
			tries = append(tries, shm, sysv, flock)
		}
	case baton.KindSemaphore:
		shm := func() (baton.Info, error) { return shmsem.Inspect(d.ns, name) }
		sysv := func() (baton.Info, error) { return semaphore.Inspect(d.ns, name) }
		tries = ordered(d.o.sem == SemSysV, shm, sysv)
	case baton.KindCond:
		tries = append(tries, func() (baton.Info, error) { return condvar.Inspect(d.ns, name) })
	case baton.KindQueue:
		tries = append(tries, func() (baton.Info, error) { return shmqueue.Inspect(d.ns, name) })
	case baton.KindChannel:
		tries = append(tries, func() (baton.Info, error) { return shmchan.Inspect(d.ns, name) })
	default:
		return baton.Info{}, fmt.Errorf("%w: local: unknown kind %q", baton.ErrInvalidArgument, kind)
	}
	for _, try := range tries {
		in, err := try()
		if err == nil {
			in.Backend = d.Kind()
			return in, nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, baton.ErrUnsupported) {
			return baton.Info{}, err
		}
	}
	return baton.Info{}, fmt.Errorf("local: %s %q: %w", kind, name, fs.ErrNotExist)
}

// ordered returns a then b, or b then a when second is true.
func ordered[T any](second bool, a, b T) []T {
	if second {
		return []T{b, a}
	}
	return []T{a, b}
}

// Remove deletes every object of kind called name, whatever its mechanism.
// Holders of a removed object see their holds lost.
func (d *backend) Remove(ctx context.Context, kind baton.Kind, name string) error {
	var removes []func() error
	rmFlock := func(dirKind string, extra ...string) func() error {
		return func() error {
			p, err := d.ns.Path(dirKind, name)
			if err != nil {
				return err
			}
			err = os.Remove(p)
			for _, suffix := range extra {
				if e := os.Remove(p + suffix); err != nil && e == nil {
					err = nil
				}
			}
			return err
		}
	}
	switch kind {
	case baton.KindMutex:
		removes = append(removes, func() error { return mutex.Remove(d.ns, name) }, rmFlock(kindFlock))
	case baton.KindRWMutex:
		removes = append(removes, func() error { return shmrw.Remove(d.ns, name) },
			func() error { return rwlock.Remove(d.ns, name) }, rmFlock(kindRWFlock, gateSuffix))
	case baton.KindSemaphore:
		removes = append(removes, func() error { return shmsem.Remove(d.ns, name) },
			func() error { return semaphore.Remove(d.ns, name) })
	case baton.KindCond:
		removes = append(removes, func() error { return condvar.Remove(d.ns, name) })
	case baton.KindQueue:
		removes = append(removes, func() error { return shmqueue.Remove(d.ns, name) })
	case baton.KindChannel:
		removes = append(removes, func() error { return shmchan.Remove(d.ns, name) })
	default:
		return fmt.Errorf("%w: local: unknown kind %q", baton.ErrInvalidArgument, kind)
	}
	found := false
	var errs []error
	for _, rm := range removes {
		switch err := rm(); {
		case err == nil:
			found = true
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, baton.ErrUnsupported):
		default:
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if !found {
		return fmt.Errorf("local: %s %q: %w", kind, name, fs.ErrNotExist)
	}
	return nil
}

var _ baton.Inspector = (*backend)(nil)
