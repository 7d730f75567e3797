//go:build linux

package filelock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/internal/closing"
	"github.com/batonlock/baton/ipc"
)

const (
	pageSize = 4096
	// remoteBackstop bounds a waiter's sleep on NFS, where holders on
	// other machines wake nobody on this one.
	remoteBackstop = 10 * time.Millisecond
)

// page is the layout of the first page of a lock file, mapped shared.
type page struct {
	gen     uint32        // release generation: bumped after every unlock; futex word (atomic access only)
	waiters atomic.Uint32 // processes sleeping on gen (may overcount after a kill)
	token   atomic.Uint64 // last fencing token given
	pid     atomic.Int64  // pid of the exclusive holder, 0 when free
	since   atomic.Int64  // when it took the lock, Unix ns
}

// lockFile is one open lock file and its mapped page.
type lockFile struct {
	path     string
	fd       int
	mem      []byte
	pg       *page
	dev, ino uint64
	floor    *atomic.Uint64 // a namespace's token floor (OpenMutexIn), else nil
	mark     *mark
}

func openLockFile(path string) (*lockFile, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	fd = raiseFD(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Size < pageSize {
		// Growing to one page is idempotent, so concurrent openers agree.
		if err := unix.Ftruncate(fd, pageSize); err != nil {
			unix.Close(fd)
			return nil, &os.PathError{Op: "truncate", Path: path, Err: err}
		}
	}
	mem, err := unix.Mmap(fd, 0, pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "mmap", Path: path, Err: err}
	}
	lf := &lockFile{
		path: path, fd: fd, mem: mem,
		pg:  (*page)(unsafe.Pointer(&mem[0])),
		dev: uint64(st.Dev), ino: st.Ino,
		mark: newMark(fd, &st),
	}
	return lf, nil
}

// newMark marks the file open as fd, whose status is st, until its
// Watch is stopped.
func newMark(fd int, st *unix.Stat_t) *mark {
	m := &mark{fd: fd, dev: uint64(st.Dev), ino: st.Ino}
	m.w.Start(m, neverLost)
	return m
}

// neverLost is the loss of marks, whose check never fails.
var neverLost = driver.NewLoss()

func (lf *lockFile) close() error {
	lf.mark.w.Stop()
	err := unix.Munmap(lf.mem)
	if cerr := unix.Close(lf.fd); err == nil {
		err = cerr
	}
	return err
}

// current reports whether the open file is still linked into the file
// system: removing the path, or renaming another file over it, drops the
// link count of the open file to 0. fstat needs no path walk, so this
// check costs less than comparing inodes through stat(path).
func (lf *lockFile) current() bool {
	var st unix.Stat_t
	if err := unix.Fstat(lf.fd, &st); err != nil {
		return false
	}
	return st.Nlink > 0
}

// exclusive records this process in the page as the exclusive holder, which
// it has just become, and returns the next fencing token.
func (lf *lockFile) exclusive() uint64 {
	if lf.floor != nil {
		// A file made after another of the name was reclaimed counts on
		// from the tokens that one gave.
		ipc.RaiseFloor(&lf.pg.token, lf.floor.Load())
	}
	tok := lf.pg.token.Add(1)
	lf.pg.pid.Store(pid)
	lf.pg.since.Store(time.Now().UnixNano())
	return tok
}

// reopen replaces the open file by what the path names now.
func (lf *lockFile) reopen() error {
	nf, err := openLockFile(lf.path)
	if err != nil {
		return err
	}
	_ = lf.close()
	nf.floor = lf.floor
	*lf = *nf
	return nil
}

// released wakes the waiters of the page after an unlock.
func released(pg *page) {
	atomic.AddUint32(&pg.gen, 1)
	if pg.waiters.Load() > 0 {
		_, _ = ipc.FutexWake(&pg.gen, math.MaxInt32)
	}
}

// flockWait takes flock(how) on fd, sleeping on pg's release generation
// between tries, with no timeout: a release bumps the generation, and w
// watches the processes that hold the file, whose exit drops their lock
// without a bump, and (mk not nil) wakes whenever a description of the
// file is released. With block false it makes one try.
func flockWait(ctx context.Context, fd int, how int, pg *page, block bool, w *ipc.Waiter, mk *mark) error {
	var stop func() bool
	var stopClose func()
	defer func() {
		if stop != nil {
			stop()
		}
		if stopClose != nil {
			stopClose()
		}
	}()
	var holders chan []int // a read of the holders in progress, or nil
	for watched := false; ; {
		gen := atomic.LoadUint32(&pg.gen)
		err := unix.Flock(fd, how|unix.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case !errors.Is(err, unix.EWOULDBLOCK):
			return fmt.Errorf("flock: %w", err)
		case !block:
			return baton.ErrLocked
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if stop == nil {
			// Cancellation rings this waiter alone.
			stop = context.AfterFunc(ctx, w.Ring)
		}
		if stopClose == nil && mk != nil {
			// A holder's flock goes when it closes the file (or exits):
			// every release of a description of it rings w.
			stopClose, _ = mk.w.WakeOnClose(w)
		}
		if watched {
			watched = false
		} else if hp := pg.pid.Load(); holders == nil && hp != 0 && hp != pid && !w.WatchExit(int(hp)) {
			// The page names the exclusive holder, alive and now watched:
			// skip the read of /proc/locks, the dearest part of a wait (0
			// or a dead pid: the read finds who holds). Try once more.
			watched = true
			continue
		} else {
			if holders == nil {
				holders = make(chan []int, 1)
				go readHolders(fd, holders, w)
			}
			select {
			case pids := <-holders:
				// Watch the holders, then try once more: a holder that
				// died before its watch began has released already.
				holders, watched = nil, true
				watchHolders(pids, w)
				continue
			default:
				// The read ends with a ring.
			}
		}
		pg.waiters.Add(1)
		if onNFS(fd) {
			// Holders on other machines release without a wake here.
			_, _ = ipc.FutexWait(&pg.gen, gen, remoteBackstop)
		} else {
			// Errors other than a wake or a changed word cannot happen
			// on a mapped word; the loop retries flock either way.
			_ = w.Sleep(&pg.gen, gen)
		}
		pg.waiters.Add(^uint32(0))
	}
}

func unlock(fd int) error { return ipc.Flock(fd, unix.LOCK_UN) }

// highFD is where lock files' descriptors go. A process killed releases
// its files in the reverse order of their numbers, and the release of its
// inotify instance waits for the kernel's grace period (milliseconds): a
// lock file numbered above the instance lets go of its flock first.
const highFD = 256

// raiseFD moves fd to the lowest free number from highFD, when it can.
func raiseFD(fd int) int {
	if fd >= highFD {
		return fd
	}
	hi, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, highFD)
	if err != nil {
		return fd
	}
	unix.Close(fd)
	return hi
}

// mark is an inotify mark of this process on an open lock file, for as
// long as it is open. A holder watches its file with inotify; when it
// dies, the kernel tears its marks down before it closes the lock file,
// and for a file whose last mark that was, it first waits for a grace
// period (milliseconds), with the flock still held. Another process's
// mark on the file spares it that wait, so a waiter's handle, which
// marks the file from open, gets the lock as soon as the holder is gone.
type mark struct {
	w        ipc.Watch
	fd       int
	dev, ino uint64
}

func (m *mark) CheckLoss() error                { return nil }
func (m *mark) WatchedPath() string             { return "/proc/self/fd/" + strconv.Itoa(m.fd) }
func (m *mark) WatchedInode() (dev, ino uint64) { return m.dev, m.ino }

// grantData is the driver-private part of a grant.
type grantData struct {
	loss *driver.Loss
	stop func() // ends the watch of the file
	mode driver.Mode
}

func newGrant(lf *lockFile, mode driver.Mode, token uint64) driver.Grant {
	loss := driver.NewLoss()
	w := new(ipc.Watch)
	w.Start(nameCheck{path: lf.path, dev: lf.dev, ino: lf.ino}, loss)
	return driver.Grant{Token: token, Loss: loss, Data: &grantData{loss: loss, mode: mode, stop: w.Stop}}
}

// nameCheck is a grant's watch: the lock is lost when its path no longer
// names the file locked. It follows the file's inode, which the handle's
// mark follows already, so a grant's watch costs no system call.
type nameCheck struct {
	path     string
	dev, ino uint64
}

func (c nameCheck) CheckLoss() error {
	if !ipc.Named(c.path, c.dev, c.ino) {
		return errFileGone
	}
	return nil
}
func (c nameCheck) WatchedPath() string             { return c.path }
func (c nameCheck) WatchedInode() (dev, ino uint64) { return c.dev, c.ino }

// release ends grant g of lf: it unlocks the file and, for a writer of an
// RWMutex (gate >= 0), the gate, then wakes the waiters. A grant this
// package did not make changes nothing.
func release(lf *lockFile, gate int, g driver.Grant) error {
	gd, err := driver.DataOf[grantData](g)
	if err != nil {
		return err
	}
	// The watcher checks held files; a removal in its last interval
	// before the release is not reported (the hold is over either way).
	gd.stop()
	lostErr := gd.loss.Err()
	excl := gd.mode == driver.Exclusive
	if excl && lostErr == nil {
		lf.pg.pid.Store(0)
	}
	if err := unlock(lf.fd); err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	if excl && gate >= 0 {
		if err := unlock(gate); err != nil {
			return fmt.Errorf("unlock gate: %w", err)
		}
	}
	released(lf.pg)
	if lostErr != nil {
		return lostErr
	}
	return nil
}

// pid is this process's id, recorded in the page of locks it holds.
var pid = int64(os.Getpid())

var errFileGone = errors.New("lock file removed or replaced while held")

// handle is what Mutex and RWMutex share: the lock file with its page, and
// the state of Close.
type handle struct {
	mu     sync.Mutex // guards closed; the core serializes the rest
	lf     *lockFile
	closed bool
	waiter ipc.Waiter // the sleep of the call in progress
}

// file returns the lock file, or an error matching baton.ErrClosed.
func (h *handle) file() (*lockFile, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, baton.ErrClosed
	}
	return h.lf, nil
}

// closeWith runs before on the lock file and then closes it, the first
// time only.
func (h *handle) closeWith(before func(*lockFile)) error {
	var err error
	closing.First(&h.mu, &h.closed, func() {
		before(h.lf)
		err = h.lf.close()
	})
	return err
}

// close closes the lock file and then runs more, the first time only.
func (h *handle) close(more func() error) error {
	var err error
	closing.First(&h.mu, &h.closed, func() {
		err = h.lf.close()
		if more != nil {
			if merr := more(); err == nil {
				err = merr
			}
		}
	})
	return err
}

// Mutex is a flock(2) mutex over one file; it implements driver.Lock
// (Exclusive mode only). The zero value is not usable; use OpenMutex.
type Mutex struct {
	handle
	reclaim bool // OpenMutexIn: the file goes when idle
}

// OpenMutex opens (creating it with mode 0600 when missing) the lock file at
// path.
func OpenMutex(path string) (*Mutex, error) {
	lf, err := openLockFile(path)
	if err != nil {
		return nil, fmt.Errorf("filelock: %w", err)
	}
	return &Mutex{handle: handle{lf: lf}}, nil
}

func (m *Mutex) Acquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	return m.acquire(ctx, mode, true)
}

func (m *Mutex) TryAcquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	return m.acquire(ctx, mode, false)
}

func (m *Mutex) acquire(ctx context.Context, mode driver.Mode, block bool) (driver.Grant, error) {
	if mode != driver.Exclusive {
		return driver.Grant{}, fmt.Errorf("mutex in %s mode: %w", mode, baton.ErrUnsupported)
	}
	lf, err := m.file()
	if err != nil {
		return driver.Grant{}, err
	}
	defer m.waiter.Close()
	for {
		if err := flockWait(ctx, lf.fd, unix.LOCK_EX, lf.pg, block, &m.waiter, lf.mark); err != nil {
			return driver.Grant{}, err
		}
		if !lf.current() {
			// Locked an orphan: the file was removed or replaced. Its
			// other waiters may have tried while this held it: they
			// sleep until its generation moves.
			_ = unlock(lf.fd)
			released(lf.pg)
			if err := lf.reopen(); err != nil {
				return driver.Grant{}, err
			}
			continue
		}
		return newGrant(lf, driver.Exclusive, lf.exclusive()), nil
	}
}

func (m *Mutex) Release(ctx context.Context, g driver.Grant) error {
	return release(m.lf, -1, g)
}

// TryFirst tells the core that TryAcquire is a local syscall.
func (m *Mutex) TryFirst() bool { return true }

func (m *Mutex) Downgrade(ctx context.Context, g driver.Grant) (driver.Grant, error) {
	return driver.Grant{}, fmt.Errorf("mutex downgrade: %w", baton.ErrUnsupported)
}

// Close closes the lock file; a hold still held is released by the kernel.
func (m *Mutex) Close() error {
	if m.reclaim {
		return m.closeWith(reclaim)
	}
	return m.close(nil)
}
