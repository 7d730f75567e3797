//go:build linux

package ipc

import (
	"fmt"
	"io/fs"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/batonlock/baton"
	"golang.org/x/sys/unix"
)

// Layout describes the file of a kind of object for OpenShared.
type Layout struct {
	Kind  string // the kind of the entries opened with it
	Size  int
	Magic uint32 // the first word of the file, written at its creation
	// Fence is the offset of the object's 64-bit token counter, 0 for
	// none. A new file's counter starts at the namespace's token floor,
	// which every reclaimed file raises to its own counter, so that
	// tokens keep increasing per name across reclaims.
	Fence int
	// Last, when not nil, returns the last token the object gave, read
	// from its file's bytes, for an object whose counter at Fence is not
	// the whole of it; nil: the counter is.
	Last func(b []byte) uint64
	// Idle reports whether the object keeps nothing a later opener must
	// find, so that its file may go. It is called at the last close of
	// the file in the host, with the file locked against every opener:
	// no other handle is open, and waiter counts or slots it reads are
	// those of dead processes. Nil: the file is never reclaimed.
	Idle func(b []byte) bool
}

// last returns the last token given by the object in b, the bytes of its
// file.
func (lay *Layout) last(b []byte) uint64 {
	if lay.Last != nil {
		return lay.Last(b)
	}
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&b[lay.Fence])))
}

// shared is the mapping of one file, shared by the handles of the process
// that have it open. Its descriptor holds a shared flock(2) of the file for
// as long as one of them is open: that is how another process, about to
// reclaim the file, knows that this one has it open.
type shared struct {
	ns    *Namespace
	name  string // its path is built again when needed rather than kept
	lay   *Layout
	addr  unsafe.Pointer
	ch    *chunk // the chunk of addr (see mapFile), nil for a mapping of its own
	ino   uint64
	dev   uint32 // Linux device numbers have 32 bits
	fd    int32
	opens int32        // handles not released; guarded by sharedMu
	maps  atomic.Int32 // handles not closed, and the linger: the mapping goes with the last
	lg    *lingerState // non-nil while the file lingers (see linger); guarded by sharedMu
	// fields are the handle fields taken (bit f-1: field f; see
	// TakeField); guarded by sharedMu.
	fields [2]uint64
}

// fieldCursor is where TakeField's search for a free field starts, for
// every file: it moves past each field taken, so that a field given back
// is taken again as late as can be. Guarded by sharedMu.
var fieldCursor uint8

func (sh *shared) path() string { return sh.ns.Resolve(sh.lay.Kind, sh.name).Path() }
func (sh *shared) size() int    { return sh.lay.Size }

// sharedKey names the files of one kind of one namespace directory.
type sharedKey struct{ dir, kind string }

var (
	sharedMu sync.Mutex
	shareds  = map[sharedKey]map[string]*shared{} // by name; guarded by sharedMu
)

// OpenShared maps the file of e, of layout lay, for one handle, creating it
// when missing. Handles of one file in a process share one mapping and one
// descriptor; the handle that releases last (Release, Close) removes the
// file when no other process has it open and lay.Idle says the object is
// idle, so that idle names leave nothing behind — at once, or at the end
// of the namespace's linger (Namespace.SetLinger), during which the
// process keeps the file open and a new handle takes it up again.
//
// Reclaim never makes two objects of one name: a new file appears whole
// (created unnamed, then linked), an opener holds a shared flock of the
// file from before it uses it until its last handle is released, the
// reclaimer removes the file only under an exclusive flock taken without
// waiting, and an opener that got its flock checks that the file it locked
// still has its name (its link count), or starts again.
func OpenShared(e Entry, lay *Layout) (*Region, error) {
	if err := checkRegionArgs(e.kind, lay.Size); err != nil {
		return nil, err
	}
	if err := e.valid(lay.Kind); err != nil {
		return nil, err
	}
	if sh := join(e, nil); sh != nil {
		return sh.region(), nil
	}
	sh, err := openShared(e, lay)
	if err != nil {
		return nil, err
	}
	if other := join(e, sh); other != sh {
		// Another goroutine mapped the file meanwhile: its flock keeps
		// the file, so this one's goes without reclaiming.
		sh.unmap()
		unix.Close(int(sh.fd))
		return other.region(), nil
	}
	return sh.region(), nil
}

// join counts one more handle on the mapping of e, and returns it; when
// there is none, it installs sh (which then has its first handle counted)
// or returns nil when sh is nil.
func join(e Entry, sh *shared) *shared {
	k := sharedKey{e.ns.dir, e.kind}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	m := shareds[k]
	if old := m[e.name]; old != nil {
		old.opens++
		old.maps.Add(1)
		return old
	}
	if sh != nil {
		if m == nil {
			m = map[string]*shared{}
			shareds[k] = m
		}
		m[e.name] = sh
		sh.opens = 1
		sh.maps.Store(1)
	}
	return sh
}

// leave forgets sh as the mapping of its name, unless another took its
// place. The caller holds sharedMu.
func (sh *shared) leave() {
	k := sharedKey{sh.ns.dir, sh.lay.Kind}
	// The map of a kind stays when empty: one per kind and namespace,
	// and growing it again would cost each burst of opens.
	if m := shareds[k]; m[sh.name] == sh {
		delete(m, sh.name)
	}
}

func (sh *shared) region() *Region { return &Region{sh: sh} }

// DevIno returns the device and inode of the file of a region of
// OpenShared, as they were when it was opened.
func (r *Region) DevIno() (dev, ino uint64) {
	return uint64(r.sh.dev), r.sh.ino
}

// Forget makes later opens of the file in this process map it anew: its
// handles found it removed or replaced (Remove, baton rm), and new handles
// must share the file that the path now names.
func (r *Region) Forget() {
	if r.sh.fd < 0 {
		return
	}
	sharedMu.Lock()
	r.sh.leave()
	sharedMu.Unlock()
}

// forgetShared makes later opens of name among kind in this process map
// its file anew.
func forgetShared(ns *Namespace, kind, name string) {
	k := sharedKey{ns.dir, kind}
	sharedMu.Lock()
	if sh := shareds[k][name]; sh != nil {
		sh.leave()
	}
	sharedMu.Unlock()
}

// Release gives back the handle's open of a region of OpenShared, keeping
// its mapping until Close: the last release in the process reclaims the
// file if it is idle. Releasing twice, or a region not shared, is a no-op.
func (r *Region) Release() {
	regionMu.Lock()
	sh := r.sh
	if sh.fd < 0 || r.released {
		regionMu.Unlock()
		return
	}
	r.released = true
	regionMu.Unlock()
	sharedMu.Lock()
	sh.opens--
	last := sh.opens == 0
	if last && sh.linger() {
		sharedMu.Unlock()
		return
	}
	if last {
		sh.leave()
	}
	sharedMu.Unlock()
	if last {
		sh.finish()
	}
}

// finish reclaims the file of sh, which has no handle left and which no
// new handle can join, if it is idle, and closes its descriptor.
func (sh *shared) finish() {
	sh.reclaim()
	// Unlocked explicitly: the mapping, which stays until the handles
	// are unreachable, holds the open file and with it the flock, past
	// the close of the descriptor. Openers waiting on the flock then
	// check the file's link count.
	unix.Flock(int(sh.fd), unix.LOCK_UN)
	unix.Close(int(sh.fd))
}

// reclaim removes the file if no other process has it open and it is
// idle. The caller holds the last open in the process, and closes the
// descriptor after.
func (sh *shared) reclaim() {
	if sh.lay.Idle == nil || unix.Flock(int(sh.fd), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return
	}
	if !sh.lay.Idle(unsafe.Slice((*byte)(sh.addr), sh.lay.Size)) {
		return
	}
	var st unix.Stat_t
	if unix.Fstat(int(sh.fd), &st) != nil || st.Nlink == 0 {
		return // removed meanwhile: the path is not this file's name any more
	}
	if sh.lay.Fence > 0 {
		if f, err := tokenFloor(sh.ns); err == nil {
			raise(f, sh.lay.last(unsafe.Slice((*byte)(sh.addr), sh.lay.Size)))
		} else {
			return // the tokens would start again: keep the file
		}
	}
	unix.Unlink(sh.path())
}

func (sh *shared) unmap()               { sh.unmapErr() }
func (sh *shared) unmapErr() error      { return unmapFile(sh.addr, sh.lay.Size, sh.ch) }
func (sh *shared) base() unsafe.Pointer { return sh.addr }

// openShared maps the file of e, creating it when missing, with a shared
// flock held on its descriptor.
func openShared(e Entry, lay *Layout) (*shared, error) {
	for {
		fd, err := openNoEINTR(e.path, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.ENOENT {
			sh, err := create(e, lay)
			if err == unix.EEXIST {
				continue // another opener linked its file first
			}
			return sh, err
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: e.path, Err: err}
		}
		sh, again, err := attach(e, lay, fd)
		if again {
			continue
		}
		if err != nil {
			unix.Close(fd)
		}
		return sh, err
	}
}

// attach maps the file open at fd once it holds its shared flock; again
// says that the path names another file now (the one at fd was reclaimed
// meanwhile), and the caller starts over.
func attach(e Entry, lay *Layout, fd int) (sh *shared, again bool, err error) {
	if err := Flock(fd, unix.LOCK_SH); err != nil {
		return nil, false, &fs.PathError{Op: "flock", Path: e.path, Err: err}
	}
	// A file reclaimed (or removed) meanwhile has no link left; the file
	// the path names now is another.
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, false, &fs.PathError{Op: "stat", Path: e.path, Err: err}
	}
	if st.Nlink == 0 {
		unix.Close(fd)
		return nil, true, nil
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, false, fmt.Errorf("%w: %s is not a regular file", baton.ErrMismatch, e.path)
	}
	if st.Size != int64(lay.Size) {
		return nil, false, fmt.Errorf("%w: region %s has %d bytes, not %d", baton.ErrMismatch, e.path, st.Size, lay.Size)
	}
	addr, ch, err := mapFile(fd, lay.Size)
	if err != nil {
		return nil, false, &fs.PathError{Op: "mmap", Path: e.path, Err: err}
	}
	sh = &shared{ns: e.ns, name: e.name, lay: lay, addr: addr, ch: ch, dev: uint32(st.Dev), ino: st.Ino, fd: int32(fd)}
	// Before any write: the token counter of another layout may be
	// elsewhere.
	if m := (*atomic.Uint32)(addr).Load(); m != lay.Magic && m != 0 {
		sh.unmap()
		return nil, false, fmt.Errorf("%w: %s is not a %s file (magic %#x)", baton.ErrMismatch, e.path, lay.Kind, m)
	}
	if lay.Fence > 0 {
		floor, err := tokenFloor(e.ns)
		if err != nil {
			sh.unmap()
			return nil, false, err
		}
		sh.raiseFence(floor)
	}
	return sh, false, nil
}

// TakeField returns a number in 1..MaxField that no other handle of the
// region's file in this process has taken and not given back (PutField),
// so that a word of the file can name one handle; 0 when all are taken.
// A field given back is taken again as late as can be.
func (r *Region) TakeField() uint64 {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	sh := r.sh
	for i := range MaxField {
		f := (int(fieldCursor) + i) % MaxField
		if sh.fields[f/64]&(1<<(f%64)) == 0 {
			sh.fields[f/64] |= 1 << (f % 64)
			fieldCursor = uint8((f + 1) % MaxField)
			return uint64(f + 1)
		}
	}
	return 0
}

// PutField gives back field f of TakeField (0: none was taken).
func (r *Region) PutField(f uint64) {
	if f == 0 {
		return
	}
	sharedMu.Lock()
	r.sh.fields[(f-1)/64] &^= 1 << ((f - 1) % 64)
	sharedMu.Unlock()
}

// FieldsTaken returns how many fields of the region's file are taken.
func (r *Region) FieldsTaken() int {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	return bits.OnesCount64(r.sh.fields[0]) + bits.OnesCount64(r.sh.fields[1])
}
