package ipc

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// errSetRemoved is the cause given to the losses of holds in a removed set.
var errSetRemoved = errors.New("System V set removed")

// NamedSet is one handle's connection to the System V semaphore set that an
// entry of a namespace stands for (packages rwlock and semaphore build on
// it). The set can be removed under the handle (baton rm, ipcrm): the
// handle then moves to the set the name stands for next, a new incarnation,
// and the holds taken in the old one are lost. The zero value is not
// usable; use OpenNamedSet. A NamedSet is safe for concurrent use.
type NamedSet struct {
	e     Entry
	nsems int
	param int64
	init  func(*SemSet) error

	mu     sync.Mutex                     // serialises open, Reopen and Close
	cur    atomic.Pointer[SetIncarnation] // the set in use; replaced under mu
	closed atomic.Bool                    // set under mu
}

// SetIncarnation is one set the name has stood for while the handle used
// it. Grants point to it, so that a release goes to the set it was taken in
// and carries that set's loss.
type SetIncarnation struct {
	Set *SemSet
	// Loss fires when the set is removed while the handle uses it, or
	// when the handle moves to another set because this one was removed.
	Loss *driver.Loss

	obj    *Object
	stop   func() // ends the watch of the set
	grants [2]SetGrant
}

// SetGrant is the driver data of a grant taken in a set: where and in which
// mode. Each incarnation has one per mode, so a grant allocates nothing.
type SetGrant struct {
	Inc  *SetIncarnation
	Mode driver.Mode
}

// Grant returns the grant data of mode in the incarnation.
func (i *SetIncarnation) Grant(mode driver.Mode) *SetGrant { return &i.grants[mode&1] }

// NextCounter adds one to the counter of the name's record and returns it;
// see Object.NextCounter.
func (i *SetIncarnation) NextCounter() (uint64, error) { return i.obj.NextCounter() }

// Counter returns the counter of the name's record.
func (i *SetIncarnation) Counter() (uint64, error) { return i.obj.Counter() }

// OpenNamedSet opens the set of e, which must be an entry of kind
// (KindSysvRW or KindSysvSem), creating it with nsems semaphores and param
// in its record when the name has none, as OpenSemObject does; init runs on
// every set this handle creates. what names the user of the set in errors.
func OpenNamedSet(e Entry, kind, what string, nsems int, param int64, init func(*SemSet) error) (*NamedSet, error) {
	if err := e.valid(kind); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	s := &NamedSet{e: e, nsems: nsems, param: param, init: init}
	if err := s.open(); err != nil {
		return nil, err
	}
	return s, nil
}

// Entry returns the entry the set was opened for.
func (s *NamedSet) Entry() Entry { return s.e }

// open resolves the name to its set; s.mu is held or s is not shared yet.
func (s *NamedSet) open() error {
	obj, err := OpenSemObject(s.e, s.nsems, s.param, s.init)
	if err != nil {
		return err
	}
	inc := &SetIncarnation{Set: obj.Sem(), Loss: driver.NewLoss(), obj: obj}
	inc.grants = [2]SetGrant{{Inc: inc, Mode: driver.Exclusive}, {Inc: inc, Mode: driver.Shared}}
	id, key := obj.ID, obj.Key
	inc.stop = WatchLoss(func() error {
		if st, err := StatSemSet(id); err != nil || st.Key != key {
			return errSetRemoved
		}
		return nil
	}, inc.Loss)
	if old := s.cur.Swap(inc); old != nil {
		// Replaced because its set was removed: its holds are lost.
		old.Loss.Fire(errSetRemoved)
		old.stop()
		_ = old.obj.Close()
	}
	return nil
}

// Current returns the incarnation in use, or an error matching
// baton.ErrClosed after Close.
func (s *NamedSet) Current() (*SetIncarnation, error) {
	if s.closed.Load() {
		return nil, baton.ErrClosed
	}
	return s.cur.Load(), nil
}

// Reopen is called when an operation on old failed with ErrRemoved: it
// returns the incarnation to retry on, which is a new set unless another
// goroutine has moved the handle already.
func (s *NamedSet) Reopen(old *SetIncarnation) (*SetIncarnation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil, baton.ErrClosed
	}
	if cur := s.cur.Load(); cur != old {
		return cur, nil
	}
	if err := s.open(); err != nil {
		return nil, err
	}
	return s.cur.Load(), nil
}

// ReopenTries bounds how often an operation moves to a new set before it
// gives up: a set removed that often in a row is being removed on purpose.
const ReopenTries = 8

// ErrChurn is the error of an operation that gave up after ReopenTries
// sets were removed under it, the last with err.
func (s *NamedSet) ErrChurn(err error) error {
	return fmt.Errorf("the set keeps being removed: %w", err)
}

// Close ends the watch of the set in use and closes its record. Holds still
// held stay held until released or until the process ends.
func (s *NamedSet) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil
	}
	s.closed.Store(true)
	inc := s.cur.Load()
	inc.stop()
	return inc.obj.Close()
}

// Backend is the backend name that descriptions of namespace objects give.
const Backend = "local"

// InspectSet starts the description of the set that name stands for among
// objects of kind (KindSysvRW or KindSysvSem), as a baton object of
// objKind: what its record tells. It returns the set too when it still
// exists, and nil when it was removed (the description says so). A name
// without a record gives an error matching fs.ErrNotExist.
func InspectSet(ns *Namespace, kind string, objKind baton.Kind, name string) (baton.Info, Record, *SemSet, error) {
	rec, err := Lookup(ns, kind, name)
	if err != nil {
		return baton.Info{}, Record{}, nil, err
	}
	in := baton.Info{
		Name:    rec.Name,
		Kind:    objKind,
		Backend: Backend,
		Impl:    "sysv",
		Holders: []baton.Holder{},
		Waiters: -1,
		Detail:  fmt.Sprintf("semid %d key %#x", rec.ID, uint32(rec.Key)),
	}
	if !rec.Alive {
		in.Detail += " (removed; the next open creates it again)"
		return in, rec, nil, nil
	}
	set, err := OpenSemSetID(rec.ID)
	if err != nil {
		return in, rec, nil, err
	}
	return in, rec, set, nil
}
