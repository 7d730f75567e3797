package ipc

import (
	"sync"
	"time"

	"github.com/batonlock/baton/driver"
)

const (
	// WatchEvery is how often watched objects are checked, those whose
	// file the kernel's inotify follows excepted: they are checked when
	// the file's links change, and every watchSafety.
	WatchEvery = 100 * time.Millisecond
	// watchSafety is how often files followed by inotify are checked all
	// the same: a rename of a directory above one changes its path and
	// tells the file nothing.
	watchSafety = 10 * time.Second
	// watchLinger keeps the watcher goroutine alive this long after the
	// last registration ends, so that holds taken and released in a loop
	// do not start a goroutine each time.
	watchLinger = 300 * time.Millisecond
)

// A Checker reports, with an error, that the object behind a hold was
// removed or replaced.
type Checker interface {
	CheckLoss() error
}

// A Watch is one registration with the process's watcher. Its zero value
// is stopped; it may be a field of the watched handle, so that a
// registration costs the handle no allocation of its own.
type Watch struct {
	c    Checker
	loss *driver.Loss
	i    int // index in watcher.set while started; guarded by watcher.mu
	wd   int // inotify watch of the file, or -1: checked every WatchEvery
}

// A PathChecker is a Checker of a file, which the watcher follows with
// inotify: it is checked when the file's links change (it is removed, or
// another file renamed over it) rather than every WatchEvery, so that a
// process whose handles sit idle is not woken ten times a second.
type PathChecker interface {
	Checker
	WatchedPath() string
}

// An InodeChecker is a PathChecker that knows its file's device and inode:
// a second registration on a file the process follows already shares that
// inotify watch without a system call (a handle opened on a name the
// process has open).
type InodeChecker interface {
	PathChecker
	WatchedInode() (dev, ino uint64)
}

var watcher struct {
	mu      sync.Mutex
	set     []*Watch      // guarded by mu
	running bool          // guarded by mu
	ticked  int           // registrations without inotify, guarded by mu
	kick    chan struct{} // wakes the loop from a long sleep when ticked grows
}

// Start calls c.CheckLoss every WatchEvery (or, for a PathChecker, when
// its file changes) until Stop is called, and fires loss with its error
// the first time it returns one (loss may be nil: c only looks). One goroutine serves every registration
// of the process; it ends shortly after the last one stops. A Watch is
// started at most once.
func (w *Watch) Start(c Checker, loss *driver.Loss) {
	w.c, w.loss, w.wd = c, loss, -1
	watcher.mu.Lock()
	if pc, ok := c.(PathChecker); ok {
		w.wd = inotifyAdd(pc, w)
	}
	if w.wd < 0 {
		watcher.ticked++
	}
	w.i = len(watcher.set)
	watcher.set = append(watcher.set, w)
	if !watcher.running {
		watcher.running = true
		if watcher.kick == nil {
			watcher.kick = make(chan struct{}, 1)
		}
		go watchLoop()
	} else if w.wd < 0 {
		select {
		case watcher.kick <- struct{}{}:
		default:
		}
	}
	watcher.mu.Unlock()
}

// Stop ends the registration. Stopping twice, or a Watch never started, is
// a no-op.
func (w *Watch) Stop() {
	watcher.mu.Lock()
	defer watcher.mu.Unlock()
	if w.c == nil {
		return
	}
	if w.wd >= 0 {
		inotifyRemove(w.wd, w)
	} else {
		watcher.ticked--
	}
	last := len(watcher.set) - 1
	moved := watcher.set[last]
	watcher.set[w.i], moved.i = moved, w.i
	watcher.set[last] = nil
	watcher.set = watcher.set[:last]
	w.c = nil
	if last == 0 {
		// The loop may sleep long (inotify's files only): let it see the
		// empty set and end.
		select {
		case watcher.kick <- struct{}{}:
		default:
		}
	}
}

type checkFunc func() error

func (f checkFunc) CheckLoss() error { return f() }

// WatchLoss is Start for a check function, on a Watch of its own.
func WatchLoss(check func() error, loss *driver.Loss) (stop func()) {
	w := new(Watch)
	w.Start(checkFunc(check), loss)
	return w.Stop
}

type pathCheck struct {
	checkFunc
	path string
}

func (p pathCheck) WatchedPath() string { return p.path }

// WatchFileLoss is WatchLoss for a check of the file at path (see
// PathChecker).
func WatchFileLoss(path string, check func() error, loss *driver.Loss) (stop func()) {
	w := new(Watch)
	w.Start(pathCheck{check, path}, loss)
	return w.Stop
}

// checkWatches checks ws, copied out of the set, and fires the loss of
// those whose check fails.
func checkWatches(ws []*Watch, cs []Checker) {
	for i, w := range ws {
		// A registration without a loss (nil) only looks.
		if cs[i] != nil && (w.loss == nil || w.loss.Err() == nil) {
			if err := cs[i].CheckLoss(); err != nil && w.loss != nil {
				w.loss.Fire(err)
			}
		}
	}
}

// watchChunk bounds the registrations copied out of watcher.set at a
// time, so that the loop's scratch does not grow with the handles open.
const watchChunk = 128

func watchLoop() {
	t := time.NewTimer(WatchEvery)
	defer t.Stop()
	var (
		idleSince time.Time
		lastAll   = time.Now()
		ws        [watchChunk]*Watch
		cs        [watchChunk]Checker
	)
	for {
		select {
		case <-t.C:
		case <-watcher.kick:
		}
		watcher.mu.Lock()
		if len(watcher.set) == 0 {
			if idleSince.IsZero() {
				idleSince = time.Now()
			}
			if time.Since(idleSince) >= watchLinger {
				watcher.running = false
				inotifyClose()
				watcher.mu.Unlock()
				return
			}
			watcher.mu.Unlock()
			t.Reset(WatchEvery)
			continue
		}
		idleSince = time.Time{}
		all := time.Since(lastAll) >= watchSafety
		if all {
			lastAll = time.Now()
		}
		// A Stop between chunks moves the last registration to the
		// stopped one's index, which this tick may have passed: that one
		// is checked at the next tick.
		for next := 0; next < len(watcher.set); {
			n := copy(ws[:], watcher.set[next:])
			for i, w := range ws[:n] {
				if all || w.wd < 0 {
					cs[i] = w.c
				}
			}
			next += n
			watcher.mu.Unlock()
			checkWatches(ws[:n], cs[:n])
			clear(ws[:n])
			clear(cs[:n])
			watcher.mu.Lock()
		}
		// Only inotify's files: sleep until the next check of them all
		// (or until a registration without inotify starts).
		d := WatchEvery
		if watcher.ticked == 0 {
			d = max(watchSafety-time.Since(lastAll), 0)
		}
		watcher.mu.Unlock()
		t.Reset(d)
	}
}
