package recipe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/batonlock/baton"
)

// Part is one lock of a MultiLock: a name on a Backend.
//
// Store identifies the store behind Backend to every process that locks
// these names: the same string wherever the same Redis, etcd cluster or
// namespace directory is meant ("redis://db1:6379", "local"). Parts are
// acquired in the order of Store, then Name, so two MultiLocks that share
// names never wait for each other in a cycle, in one process or across
// many; the order is only as global as the Store strings are. A program
// whose MultiLocks all use one Backend may leave Store empty.
type Part struct {
	Store   string
	Backend baton.Backend
	Name    string
}

// Parts returns a Part for each name, all on b under store.
func Parts(store string, b baton.Backend, names ...string) []Part {
	ps := make([]Part, len(names))
	for i, n := range names {
		ps[i] = Part{Store: store, Backend: b, Name: n}
	}
	return ps
}

// MultiLock locks several names, possibly on several Backends, as one
// lock: Lock and TryLock take every part or none.
//
// Every part is acquired in one global order (Store, then Name; see Part),
// whatever order the parts were given in, so MultiLocks with overlapping
// parts cannot deadlock; they are released in the reverse order. A
// MultiLock is safe for concurrent use: its goroutines exclude each other
// as its parts' handles do. It is not reentrant: a context that carries an
// Owner (baton.WithOwner) is refused, since a second Lock by the owner
// would count holds on some parts and not know it on the others.
type MultiLock struct {
	parts []part // in acquisition order
	given []int  // given[i]: index in parts of the i-th Part as given

	mu  sync.Mutex
	cur *MultiHold // guarded by mu; the hold of the goroutine that holds every part
}

type part struct {
	Part
	m baton.Mutex
}

// NewMultiLock opens a Mutex handle for each part. It refuses, with an
// error matching baton.ErrInvalidArgument or baton.ErrInvalidName and
// before opening anything, no parts, a nil Backend, an invalid name, a
// name given twice in one Store, and one Backend under two Stores.
func NewMultiLock(ctx context.Context, parts ...Part) (*MultiLock, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("recipe: multilock: no parts: %w", baton.ErrInvalidArgument)
	}
	order := make([]int, len(parts))
	stores := make(map[baton.Backend]string)
	for i, p := range parts {
		order[i] = i
		if p.Backend == nil {
			return nil, fmt.Errorf("recipe: multilock: part %d: nil Backend: %w", i, baton.ErrInvalidArgument)
		}
		if err := baton.ValidateName(p.Name); err != nil {
			return nil, fmt.Errorf("recipe: multilock: part %d: %w", i, err)
		}
		if !reflect.TypeOf(p.Backend).Comparable() {
			continue
		}
		if s, ok := stores[p.Backend]; ok && s != p.Store {
			return nil, fmt.Errorf("recipe: multilock: one Backend in stores %q and %q: %w", s, p.Store, baton.ErrInvalidArgument)
		}
		stores[p.Backend] = p.Store
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(parts[a].Store, parts[b].Store), cmp.Compare(parts[a].Name, parts[b].Name))
	})
	for k := 1; k < len(order); k++ {
		a, b := parts[order[k-1]], parts[order[k]]
		if a.Store == b.Store && a.Name == b.Name {
			return nil, fmt.Errorf("recipe: multilock: %q given twice in store %q: %w", a.Name, a.Store, baton.ErrInvalidArgument)
		}
	}
	ml := &MultiLock{parts: make([]part, len(parts)), given: make([]int, len(parts))}
	for k, i := range order {
		m, err := parts[i].Backend.Mutex(ctx, parts[i].Name)
		if err != nil {
			ml.parts = ml.parts[:k]
			return nil, errors.Join(err, ml.Close())
		}
		ml.parts[k] = part{Part: parts[i], m: m}
		ml.given[i] = k
	}
	return ml, nil
}

// Lock waits until every part is held or ctx is done. On failure (ctx
// ended, a backend failed, or a part already taken was lost before the
// last was taken, matching baton.ErrLost) it releases what it took, in
// reverse order, and returns the error: nothing is held.
func (ml *MultiLock) Lock(ctx context.Context) (*MultiHold, error) {
	return ml.lock(ctx, baton.Mutex.Lock)
}

// TryLock takes every part or none, without waiting: when a part is taken
// it releases what it took and returns an error matching baton.ErrLocked.
func (ml *MultiLock) TryLock(ctx context.Context) (*MultiHold, error) {
	return ml.lock(ctx, baton.Mutex.TryLock)
}

func (ml *MultiLock) lock(ctx context.Context, take func(baton.Mutex, context.Context) (baton.Hold, error)) (*MultiHold, error) {
	if ctx == nil || baton.OwnerOf(ctx) != 0 {
		return nil, fmt.Errorf("recipe: multilock: a nil context or one with an Owner: %w", baton.ErrInvalidArgument)
	}
	holds := make([]baton.Hold, len(ml.parts))
	for k := range ml.parts {
		h, err := take(ml.parts[k].m, ctx)
		if err == nil {
			holds[k] = h
			// A part lost while later ones were awaited makes the whole
			// hold worthless before it is returned.
			for j := range k {
				if err = holds[j].Err(); err != nil {
					k++ // release the part just taken too
					break
				}
			}
		}
		if err != nil {
			return nil, errors.Join(err, ml.release(context.WithoutCancel(ctx), k))
		}
	}
	mh := &MultiHold{ml: ml, holds: holds, done: make(chan struct{})}
	ml.mu.Lock()
	ml.cur = mh
	ml.mu.Unlock()
	return mh, nil
}

// release unlocks parts[:n] in reverse order and joins their errors.
func (ml *MultiLock) release(ctx context.Context, n int) error {
	var errs []error
	for k := n - 1; k >= 0; k-- {
		if err := ml.parts[k].m.Unlock(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Unlock releases every part, in the reverse order of acquisition, also
// when one fails, and joins their errors (one matching baton.ErrLost per
// part that was lost). Without a hold it returns an error matching
// baton.ErrNotHeld and releases nothing.
func (ml *MultiLock) Unlock(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("recipe: multilock: nil context: %w", baton.ErrInvalidArgument)
	}
	ml.mu.Lock()
	mh := ml.cur
	ml.cur = nil
	ml.mu.Unlock()
	if mh == nil {
		return fmt.Errorf("recipe: multilock: unlock: %w", baton.ErrNotHeld)
	}
	mh.stop()
	return ml.release(ctx, len(ml.parts))
}

// Close closes every part's handle; a hold still held is released.
func (ml *MultiLock) Close() error {
	ml.mu.Lock()
	if mh := ml.cur; mh != nil {
		ml.cur = nil
		mh.stop()
	}
	ml.mu.Unlock()
	var errs []error
	for k := len(ml.parts) - 1; k >= 0; k-- {
		if err := ml.parts[k].m.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// MultiHold is the hold of every part of a MultiLock. It is lost as soon
// as any part is.
type MultiHold struct {
	ml    *MultiLock
	holds []baton.Hold // in acquisition order

	once    sync.Once
	fire    sync.Once     // closes lost
	stopped sync.Once     // closes done
	lost    chan struct{} // closed on the first loss of a part
	done    chan struct{} // closed on Unlock: the watchers end
}

// Hold returns the hold of the i-th Part as given to NewMultiLock.
func (h *MultiHold) Hold(i int) baton.Hold { return h.holds[h.ml.given[i]] }

// Token returns the fencing token of the i-th Part as given to
// NewMultiLock.
func (h *MultiHold) Token(i int) baton.Token { return h.Hold(i).Token() }

// Err returns nil while every part is trusted, and the first loss found
// (matching baton.ErrLost) once one is not. Each part is checked at the
// call, as baton.Hold.Err does.
func (h *MultiHold) Err() error {
	for _, p := range h.holds {
		if err := p.Err(); err != nil {
			return err
		}
	}
	return nil
}

// Lost returns a channel that is closed when any part is lost while held;
// nil when no part can be lost. It is not closed by Unlock. A part whose
// lease deadline has passed is found at the call, as baton.Hold.Lost does.
func (h *MultiHold) Lost() <-chan struct{} {
	h.once.Do(func() {
		var chans []<-chan struct{}
		for _, p := range h.holds {
			if c := p.Lost(); c != nil {
				chans = append(chans, c)
			}
		}
		if len(chans) == 0 {
			return
		}
		h.lost = make(chan struct{})
		for _, c := range chans {
			go func() {
				select {
				case <-c:
					h.fire.Do(func() { close(h.lost) })
				case <-h.done:
				}
			}()
		}
	})
	if h.lost != nil && h.Err() != nil {
		// A lease past its deadline: closed here rather than when a
		// watcher gets to run, so that a select right after sees it.
		h.fire.Do(func() { close(h.lost) })
	}
	return h.lost
}

// Context returns a context derived from parent that is cancelled, with
// the loss as its cause, when any part is lost; its Done and Err check
// every part's lease deadline at the call. Call cancel after Unlock.
func (h *MultiHold) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx := parent
	cancels := make([]context.CancelFunc, 0, len(h.holds))
	for _, p := range h.holds {
		var c context.CancelFunc
		ctx, c = p.Context(ctx)
		cancels = append(cancels, c)
	}
	return ctx, func() {
		for _, c := range slices.Backward(cancels) {
			c()
		}
	}
}

func (h *MultiHold) stop() { h.stopped.Do(func() { close(h.done) }) }
