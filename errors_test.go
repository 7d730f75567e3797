package baton

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/batonlock/baton/driver"
)

// errBackend's drivers grant at once, except that Acquire, Signal and Close
// return cause when it is set, and TryAcquire is always refused.
type errBackend struct{ cause, closeErr error }

func (b *errBackend) Kind() string                   { return "fake" }
func (b *errBackend) ValidateName(name string) error { return nil }
func (b *errBackend) OpenMutex(ctx context.Context, name string) (driver.Lock, error) {
	return errLock{b}, nil
}
func (b *errBackend) OpenRWMutex(ctx context.Context, name string) (driver.Lock, error) {
	return errLock{b}, nil
}
func (b *errBackend) OpenSemaphore(ctx context.Context, name string, permits int64) (driver.Semaphore, error) {
	return errSem{errLock{b}, permits}, nil
}
func (b *errBackend) OpenCond(ctx context.Context, name string) (driver.Cond, error) {
	if b.cause != nil {
		return nil, b.cause
	}
	return errCond{errLock{b}}, nil
}
func (b *errBackend) Close() error { return b.closeErr }

type errLock struct{ b *errBackend }

func (d errLock) Acquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	return driver.Grant{Token: 1}, d.b.cause
}
func (d errLock) TryAcquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	return driver.Grant{}, ErrLocked
}
func (d errLock) Release(ctx context.Context, g driver.Grant) error { return nil }
func (d errLock) Downgrade(ctx context.Context, g driver.Grant) (driver.Grant, error) {
	return g, d.b.cause
}
func (d errLock) Close() error { return d.b.closeErr }

type errSem struct {
	errLock
	capacity int64
}

func (s errSem) Acquire(ctx context.Context, n int64) (driver.Grant, error) {
	return driver.Grant{}, s.b.cause
}
func (s errSem) TryAcquire(ctx context.Context, n int64) (driver.Grant, error) {
	return driver.Grant{}, ErrLocked
}
func (s errSem) Release(ctx context.Context, g driver.Grant, n int64) error { return nil }
func (s errSem) Capacity() int64                                            { return s.capacity }

type errCond struct{ errLock }

func (c errCond) Prepare(ctx context.Context) (any, error)          { return nil, nil }
func (c errCond) Wait(ctx context.Context, ticket any) error        { return nil }
func (c errCond) Cancel(ticket any)                                 {}
func (c errCond) Signal(ctx context.Context) error                  { return c.b.cause }
func (c errCond) Broadcast(ctx context.Context) error               { return c.b.cause }
func (c errCond) Release(ctx context.Context, g driver.Grant) error { return nil }

// TestErrors: every failure the core returns is one *Error naming the
// operation, backend, primitive and name, whose text has one "baton: "
// prefix, and through which errors.Is and errors.As reach the cause.
func TestErrors(t *testing.T) {
	bg := context.Background()
	done, cancel := context.WithCancel(bg)
	cancel()
	boom := errors.New("boom")
	open := func(cause, closeErr error) Backend {
		b := NewBackend(&errBackend{cause: cause, closeErr: closeErr})
		t.Cleanup(func() { b.Close() })
		return b
	}
	must := func(v any, err error) any {
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	ok := open(nil, nil)
	m := must(ok.Mutex(bg, "x")).(Mutex)
	rw := must(ok.RWMutex(bg, "r")).(RWMutex)
	sem := must(ok.Semaphore(bg, "s", 2)).(Semaphore)
	cond := must(ok.Cond(bg, "c")).(Cond)
	bad := open(boom, boom)
	bm := must(bad.Mutex(bg, "x")).(Mutex)
	brw := must(bad.RWMutex(bg, "r")).(RWMutex)
	bsem := must(bad.Semaphore(bg, "s", 2)).(Semaphore)
	closed := open(nil, nil)
	closed.Close()
	prefixed := &Error{Op: "lock", Backend: "other", Kind: KindMutex, Name: "y", Err: ErrLost}
	pm := must(open(prefixed, nil).Mutex(bg, "x")).(Mutex)

	cases := []struct {
		name string
		err  error
		want string
		is   error
		op   string
	}{
		{"lock cancelled", second(m.Lock(done)), `baton: fake mutex "x": lock: context canceled`, context.Canceled, "lock"},
		{"lock nil ctx", second(m.Lock(nil)), `baton: fake mutex "x": lock: invalid argument: nil context`, ErrInvalidArgument, "lock"},
		{"trylock", second(m.TryLock(bg)), `baton: fake mutex "x": trylock: locked`, ErrLocked, "trylock"},
		{"unlock", m.Unlock(bg), `baton: fake mutex "x": unlock: not held`, ErrNotHeld, "unlock"},
		{"lock driver", second(bm.Lock(bg)), `baton: fake mutex "x": lock: boom`, boom, "lock"},
		{"lock prefixed", second(pm.Lock(bg)), `baton: other mutex "y": lock: hold lost`, ErrLost, "lock"},
		{"rlock", second(rw.RLock(done)), `baton: fake rwmutex "r": rlock: context canceled`, context.Canceled, "rlock"},
		{"tryrlock", second(brw.TryRLock(bg)), `baton: fake rwmutex "r": tryrlock: locked`, ErrLocked, "tryrlock"},
		{"runlock", rw.RUnlock(bg), `baton: fake rwmutex "r": runlock: not held`, ErrNotHeld, "runlock"},
		{"downgrade", second(rw.Downgrade(bg)), `baton: fake rwmutex "r": downgrade: not held`, ErrNotHeld, "downgrade"},
		{"acquire", second(sem.Acquire(bg, 3)), `baton: fake semaphore "s": acquire: invalid argument: 3 permits asked of a semaphore of 2`, ErrInvalidArgument, "acquire"},
		{"acquire driver", second(bsem.Acquire(bg, 1)), `baton: fake semaphore "s": acquire: boom`, boom, "acquire"},
		{"tryacquire", second(sem.TryAcquire(bg, 1)), `baton: fake semaphore "s": tryacquire: locked`, ErrLocked, "tryacquire"},
		{"release", sem.Release(bg, 1), `baton: fake semaphore "s": release: not held: release of 1 permits, 0 held`, ErrNotHeld, "release"},
		{"wait", cond.Wait(bg, m), `baton: fake cond "c": wait: not held: the lock is not held`, ErrNotHeld, "wait"},
		{"open name", second(ok.Mutex(bg, "a//b")), `baton: fake mutex "a//b": open: invalid name: "a//b" has an empty segment (leading, trailing or double '/')`, ErrInvalidName, "open"},
		{"open closed", second(closed.Semaphore(bg, "s", 1)), `baton: fake semaphore "s": open: closed`, ErrClosed, "open"},
		{"open driver", second(bad.Cond(bg, "c")), `baton: fake cond "c": open: boom`, boom, "open"},
		{"close", bm.Close(), `baton: fake mutex "x": close: boom`, boom, "close"},
		{"lock closed", second(bm.Lock(bg)), `baton: fake mutex "x": lock: closed`, ErrClosed, "lock"},
	}
	// Signal and Broadcast of a Cond whose driver fails.
	bc := must(open(nil, nil).Cond(bg, "c")).(*condHandle)
	bc.d = errCond{errLock{&errBackend{cause: boom}}}
	cases = append(cases,
		struct {
			name string
			err  error
			want string
			is   error
			op   string
		}{"signal", bc.Signal(bg), `baton: fake cond "c": signal: boom`, boom, "signal"},
		struct {
			name string
			err  error
			want string
			is   error
			op   string
		}{"broadcast", bc.Broadcast(bg), `baton: fake cond "c": broadcast: boom`, boom, "broadcast"},
	)
	for _, c := range cases {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if got := c.err.Error(); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
		if !errors.Is(c.err, c.is) {
			t.Errorf("%s: errors.Is(%v, %v) is false", c.name, c.err, c.is)
		}
		var e *Error
		if !errors.As(c.err, &e) || e.Op != c.op {
			t.Errorf("%s: errors.As gives %#v, want an *Error with Op %q", c.name, e, c.op)
			continue
		}
		if inner := new(*Error); errors.As(e.Err, inner) {
			t.Errorf("%s: two wrappers: %v", c.name, c.err)
		}
	}
	if err := bad.Close(); err == nil || !errors.Is(err, boom) {
		t.Errorf("Backend.Close with failing drivers: %v", err)
	} else {
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Backend.Close: %v is not an *Error", err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// TestErrorClass checks every class, through the wrapping a failed call
// returns, and that the first class in ErrorClass's order wins.
func TestErrorClass(t *testing.T) {
	wrap := func(err error) error {
		return &Error{Op: "lock", Backend: "fake", Kind: KindMutex, Name: "x", Err: err}
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{wrap(ErrLocked), "locked"},
		{wrap(context.Canceled), "canceled"},
		{wrap(context.DeadlineExceeded), "deadline"},
		{wrap(ErrLost), "lost"},
		{wrap(ErrClosed), "closed"},
		{wrap(ErrNotHeld), "not_held"},
		{wrap(ErrInvalidName), "invalid"},
		{wrap(ErrInvalidArgument), "invalid"},
		{wrap(ErrUpgrade), "upgrade"},
		{wrap(ErrMismatch), "mismatch"},
		{wrap(ErrUnsupported), "unsupported"},
		{wrap(fs.ErrNotExist), "not_found"},
		{wrap(errors.New("boom")), "other"},
		{errors.Join(ErrLost, ErrLocked), "locked"},
		{errors.Join(fs.ErrNotExist, context.Canceled), "canceled"},
	} {
		if got := ErrorClass(c.err); got != c.want {
			t.Errorf("ErrorClass(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// TestErrorTextOnce: the text of an *Error says each layer once, whatever
// prefixes the driver's cause repeats, and a capacity clash reads the same
// on every backend, naming the existing capacity.
func TestErrorTextOnce(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	cases := []struct {
		e    *Error
		want string
		is   error
	}{
		{&Error{Op: "list", Backend: "redis", Err: fmt.Errorf("redislock: list: %w", refused)},
			`baton: redis: list: dial tcp 127.0.0.1:1: connect: connection refused`, refused},
		{&Error{Op: "inspect", Backend: "redis", Kind: KindMutex, Name: "x", Err: fmt.Errorf("redislock: inspect mutex %q: %w", "x", refused)},
			`baton: redis mutex "x": inspect: dial tcp 127.0.0.1:1: connect: connection refused`, refused},
		{&Error{Op: "inspect", Backend: "local", Kind: KindRWMutex, Name: "a/b", Err: fmt.Errorf("local: rwmutex %q: %w", "a/b", fs.ErrNotExist)},
			`baton: local rwmutex "a/b": inspect: file does not exist`, fs.ErrNotExist},
		{&Error{Op: "lock", Backend: "etcd", Kind: KindMutex, Name: "x", Err: fmt.Errorf("etcdlock: %w", ErrLost)},
			`baton: etcd mutex "x": lock: hold lost`, ErrLost},
		{&Error{Op: "lock", Backend: "redis", Kind: KindMutex, Name: "x", Err: context.Canceled},
			`baton: redis mutex "x": lock: context canceled`, context.Canceled},
		{&Error{Op: "close", Backend: "redlock", Err: fmt.Errorf("redlock: %w", ErrClosed)},
			`baton: redlock: close: closed`, ErrClosed},
		// A layer's name inside the cause, not in front of it, stays.
		{&Error{Op: "unlock", Backend: "postgres", Kind: KindMutex, Name: "x", Err: fmt.Errorf("release: %w", refused)},
			`baton: postgres mutex "x": unlock: release: dial tcp 127.0.0.1:1: connect: connection refused`, refused},
		{&Error{Op: "open", Backend: "redis", Kind: KindSemaphore, Name: "gpu",
			Err: &MismatchError{Param: "capacity", Have: 2, Want: 3, Err: fmt.Errorf("it exists with another capacity than 3: %w", ErrMismatch)}},
			`baton: redis semaphore "gpu": open: exists with capacity 2, not 3`, ErrMismatch},
		{&Error{Op: "open", Backend: "zookeeper", Kind: KindSemaphore, Name: "gpu", Err: &MismatchError{Param: "capacity", Want: 3}},
			`baton: zookeeper semaphore "gpu": open: exists with a capacity other than 3`, ErrMismatch},
	}
	for _, c := range cases {
		if got := c.e.Error(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
		if !errors.Is(c.e, c.is) {
			t.Errorf("%s: does not match %v", c.want, c.is)
		}
	}
}
