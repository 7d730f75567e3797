//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package ipc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton"
)

// objState is what the kernel says of the object a record names.
type objState int

const (
	stateGone   objState = iota // no such id, or another object has it now
	stateUninit                 // ours, but never initialised: its creator died
	stateAlive
)

// sysvClass is what the registry needs of one class of System V object.
type sysvClass struct {
	create func(key int32, nsems int) (id int, err error) // EEXIST: the key is taken
	byKey  func(key int32) (id int, ok bool)
	check  func(rec Record) (objState, error)
	remove func(id int) error
}

// pendingID is the ID of a record written before its object was created
// (see openObject): the object, if any, is found by the record's key.
const pendingID = -1

// resolve gives a pending record the id of the object its key names, if
// the creator got as far as creating it.
func (cl sysvClass) resolve(rec *Record) {
	if rec.ID == pendingID {
		if id, ok := cl.byKey(rec.Key); ok {
			rec.ID = id
		}
	}
}

// statRecord returns the IPC_STAT of rec's object, and whether that object
// is rec's (ours says): not when rec is pending, or its object was removed.
func statRecord[S any](rec Record, stat func(id int) (S, error), ours func(S) bool) (S, bool, error) {
	var st S
	if rec.ID == pendingID {
		return st, false, nil
	}
	st, err := stat(rec.ID)
	if isRemoved(err) {
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	return st, ours(st), nil
}

var semClass = sysvClass{
	create: createSemSetKey,
	byKey:  semSetByKey,
	check: func(rec Record) (objState, error) {
		st, ok, err := statRecord(rec, StatSemSet, func(st SemStat) bool {
			return st.Key == rec.Key && st.NSems == rec.NSems && st.UID == uint32(os.Geteuid())
		})
		if !ok {
			return stateGone, err
		}
		// semget(2): a set is not to be trusted until sem_otime is set by
		// the first semop, which here is the creator's initialisation. The
		// creator initialises while it holds the record's flock, and
		// whoever checks holds it too, so a zero sem_otime seen here is
		// not a creation in progress: the creator died half-way.
		if st.OTime == 0 {
			return stateUninit, nil
		}
		return stateAlive, nil
	},
	remove: removeSemSet,
}

var msgClass = sysvClass{
	create: func(key int32, _ int) (int, error) { return createMsgQueueKey(key) },
	byKey:  msgQueueByKey,
	check: func(rec Record) (objState, error) {
		_, ok, err := statRecord(rec, StatMsgQueue, func(st MsgStat) bool {
			return st.Key == rec.Key && st.UID == uint32(os.Geteuid())
		})
		if !ok {
			return stateGone, err
		}
		return stateAlive, nil
	},
	remove: removeMsgQueue,
}

func classOf(kind string) (sysvClass, error) {
	switch kind {
	case KindSysvSem, KindSysvRW:
		return semClass, nil
	case KindMsgQ:
		return msgClass, nil
	}
	return sysvClass{}, fmt.Errorf("%w: ipc: %q is not a System V kind", baton.ErrInvalidArgument, kind)
}

// Object is a System V object of a namespace, opened through its record.
// The record file stays open (for the counter) until Close. An Object is
// safe for concurrent use.
type Object struct {
	Record
	f *os.File
}

// Sem returns the semaphore set of a semaphore object.
func (o *Object) Sem() *SemSet { return &SemSet{id: o.ID, nsems: o.NSems} }

// NextCounter adds one to the counter kept in the record file and returns
// the new value. Callers serialise it themselves (a write lock): the
// read-modify-write is not atomic between processes. The counter is seeded
// with the wall clock in nanoseconds when the record is first made, so that
// it still grows if the record is removed and made again.
func (o *Object) NextCounter() (uint64, error) {
	var b [recordHeader]byte
	if _, err := o.f.ReadAt(b[:], 0); err != nil {
		return 0, fmt.Errorf("ipc: counter of %s: %w", o.f.Name(), err)
	}
	v := binary.NativeEndian.Uint64(b[:]) + 1
	binary.NativeEndian.PutUint64(b[:], v)
	if _, err := o.f.WriteAt(b[:], 0); err != nil {
		return 0, fmt.Errorf("ipc: counter of %s: %w", o.f.Name(), err)
	}
	return v, nil
}

// Counter returns the counter kept in the record file.
func (o *Object) Counter() (uint64, error) {
	var b [recordHeader]byte
	if _, err := o.f.ReadAt(b[:], 0); err != nil {
		return 0, fmt.Errorf("ipc: counter of %s: %w", o.f.Name(), err)
	}
	return binary.NativeEndian.Uint64(b[:]), nil
}

// Close closes the record file. The System V object stays.
func (o *Object) Close() error { return o.f.Close() }

// lockRecord opens the record file of e and locks it with flock
// (how: LOCK_EX or LOCK_SH). With create it makes the file when missing;
// without, a missing file is fs.ErrNotExist. It makes sure the locked file
// is still the one at the path (a concurrent remove unlinks it).
func lockRecord(e Entry, create bool, how int) (*os.File, error) {
	path, name := e.path, e.name
	if create {
		if err := e.ns.EnsureKind(e.kind); err != nil {
			return nil, err
		}
	}
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	for {
		f, err := os.OpenFile(path, flags, 0o600)
		if err != nil {
			return nil, fmt.Errorf("ipc: record of %q: %w", name, err)
		}
		if err := Flock(int(f.Fd()), how); err != nil {
			f.Close()
			return nil, fmt.Errorf("ipc: lock record of %q: %w", name, err)
		}
		var a, b unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &a); err != nil {
			f.Close()
			return nil, fmt.Errorf("ipc: record of %q: %w", name, err)
		}
		err = unix.Stat(path, &b)
		if err == nil && a.Ino == b.Ino && a.Dev == b.Dev {
			return f, nil
		}
		f.Close()
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("ipc: record of %q: %w", name, err)
		}
		if err != nil && !create {
			return nil, fmt.Errorf("ipc: record of %q: %w", name, fs.ErrNotExist)
		}
		// removed (and perhaps made again) while we waited: start over
	}
}

func unlockRecord(f *os.File) { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN) }

// OpenSemObject opens the semaphore set that stands for the entry e, of
// kind KindSysvSem or KindSysvRW, creating it when the name has no record
// or its set was removed. A new set has nsems semaphores, all zero; init
// runs on it (under the record's lock, before anyone else can open it) and
// must perform at least one semop, which marks the set as initialised. An
// existing set created with another param or size gives an error matching
// baton.ErrMismatch. On error nothing is left behind.
func OpenSemObject(e Entry, nsems int, param int64, init func(*SemSet) error) (*Object, error) {
	if e.kind != KindSysvSem && e.kind != KindSysvRW {
		return nil, fmt.Errorf("%w: ipc: %q is not a semaphore kind", baton.ErrInvalidArgument, e.kind)
	}
	if err := e.valid(e.kind); err != nil {
		return nil, err
	}
	if nsems <= 0 || nsems > 0xffff {
		return nil, fmt.Errorf("%w: %d semaphores in a set", baton.ErrInvalidArgument, nsems)
	}
	return openEntry(e, nsems, param, semClass, func(id int) error {
		return init(&SemSet{id: id, nsems: nsems})
	})
}

func openObject(ns *Namespace, kind, name string, nsems int, param int64, cl sysvClass, init func(id int) error) (*Object, error) {
	e, err := ns.Entry(kind, name)
	if err != nil {
		return nil, err
	}
	return openEntry(e, nsems, param, cl, init)
}

func openEntry(e Entry, nsems int, param int64, cl sysvClass, init func(id int) error) (*Object, error) {
	kind, name := e.kind, e.name
	f, err := lockRecord(e, true, unix.LOCK_EX)
	if err != nil {
		return nil, err
	}
	defer unlockRecord(f)
	fail := func(err error) (*Object, error) {
		f.Close()
		return nil, err
	}
	rec, counter, ok, err := readRecord(f)
	if err != nil {
		return fail(fmt.Errorf("ipc: record of %q: %w", name, err))
	}
	if ok {
		if rec.Name != name || rec.Kind != kind {
			return fail(fmt.Errorf("%w: ipc: record %s names %s %q, not %s %q", baton.ErrMismatch, f.Name(), rec.Kind, rec.Name, kind, name))
		}
		pending := rec.ID == pendingID
		cl.resolve(&rec)
		state, err := cl.check(rec)
		if err != nil {
			return fail(err)
		}
		switch state {
		case stateAlive:
			if rec.Param != param || rec.NSems != nsems {
				what := "parameter"
				if kind == KindSysvSem {
					what = "capacity"
				}
				return fail(&baton.MismatchError{Param: what, Have: rec.Param, Want: param})
			}
			if pending {
				// A queue needs no initialisation: keep the one its
				// creator made, and finish its record.
				if err := writeRecord(f, rec, counter); err != nil {
					return fail(err)
				}
			}
			return &Object{Record: rec, f: f}, nil
		case stateUninit:
			_ = cl.remove(rec.ID)
		}
	}
	if now := uint64(time.Now().UnixNano()); now > counter {
		counter = now
	}
	// The record, with the key, is written before the object is created,
	// and again with its id before it is initialised, so that an object is
	// never left without a record that leads to it: a creator that dies
	// before the second write leaves a pending record whose key finds the
	// object, one that dies before initialising leaves a set with a zero
	// sem_otime; the next opener (or Remove) removes either.
	rec = Record{Kind: kind, Name: name, ID: pendingID, NSems: nsems, Param: param}
	if kind == KindMsgQ {
		rec.NSems = 0
	}
	for tries := 1; ; tries++ {
		rec.Key = randomKey()
		if err := writeRecord(f, rec, counter); err != nil {
			return fail(err)
		}
		id, err := cl.create(rec.Key, nsems)
		if err == nil {
			rec.ID = id
			break
		}
		if !errors.Is(err, unix.EEXIST) || tries == 64 {
			_ = f.Truncate(recordHeader)
			return fail(err)
		}
	}
	id := rec.ID
	if err := writeRecord(f, rec, counter); err != nil {
		_ = cl.remove(id)
		return fail(err)
	}
	if init != nil {
		if err := init(id); err != nil {
			_ = cl.remove(id)
			_ = f.Truncate(recordHeader)
			return fail(err)
		}
	}
	return &Object{Record: rec, f: f}, nil
}

// Lookup returns the record of kind/name without creating anything; Alive
// tells whether its object still exists, Counter is the record's counter. A name without a record gives an
// error matching fs.ErrNotExist.
func Lookup(ns *Namespace, kind, name string) (Record, error) {
	cl, err := classOf(kind)
	if err != nil {
		return Record{}, err
	}
	e, err := ns.Entry(kind, name)
	if err != nil {
		return Record{}, err
	}
	f, err := lockRecord(e, false, unix.LOCK_SH)
	if err != nil {
		return Record{}, err
	}
	defer f.Close()
	defer unlockRecord(f)
	rec, counter, ok, err := readRecord(f)
	if err != nil {
		return Record{}, fmt.Errorf("ipc: record of %q: %w", name, err)
	}
	if !ok || rec.Name != name || rec.Kind != kind {
		return Record{}, fmt.Errorf("ipc: %s %q has no valid record: %w", kind, name, fs.ErrNotExist)
	}
	rec.Counter = counter
	cl.resolve(&rec)
	state, err := cl.check(rec)
	if err != nil {
		return Record{}, err
	}
	rec.Alive = state == stateAlive
	return rec, nil
}

// Remove removes the System V object of kind/name, if it still exists, and
// its record. Processes that wait on it wake with ErrRemoved; holds in it
// are lost. A name without a record gives an error matching fs.ErrNotExist.
func Remove(ns *Namespace, kind, name string) error {
	cl, err := classOf(kind)
	if err != nil {
		return err
	}
	e, err := ns.Entry(kind, name)
	if err != nil {
		return err
	}
	f, err := lockRecord(e, false, unix.LOCK_EX)
	if err != nil {
		return err
	}
	defer f.Close()
	defer unlockRecord(f)
	rec, _, ok, err := readRecord(f)
	if err != nil {
		return fmt.Errorf("ipc: record of %q: %w", name, err)
	}
	if ok && rec.Name == name && rec.Kind == kind {
		cl.resolve(&rec)
		state, err := cl.check(rec)
		if err != nil {
			return err
		}
		if state != stateGone {
			if err := cl.remove(rec.ID); err != nil && !isRemoved(err) {
				return err
			}
		}
	}
	if err := os.Remove(f.Name()); err != nil {
		return fmt.Errorf("ipc: remove record of %q: %w", name, err)
	}
	return nil
}

// List returns the records of every System V object kind in the namespace,
// with Alive set.
func List(ns *Namespace) ([]Record, error) {
	var out []Record
	for _, kind := range SysvKinds {
		names, err := ns.Names(kind)
		if err != nil {
			return nil, err
		}
		out, err = collect(out, names, func(name string) (Record, error) { return Lookup(ns, kind, name) })
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RemoveAll removes every System V object of the namespace and its record.
func RemoveAll(ns *Namespace) error {
	var errs []error
	for _, kind := range SysvKinds {
		names, err := ns.Names(kind)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, name := range names {
			if err := Remove(ns, kind, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
