//go:build linux

package ipc

import "time"

// The linger of a released file. The last handle of a file to be released
// in the process leaves the file open, mapped and followed by inotify for
// the namespace's linger (SetLinger); a handle opened on the name
// meanwhile takes it up again without a system call (a lock per request on
// a recurring id), and once the linger is over a goroutine of its own
// reclaims the file (see shared.reclaim) off the caller's path. Its unlinks
// and the ends of its inotify watches come in batches, so they wake the
// process's inotify reader about once per batch rather than once per name.

// lingerMax bounds the files lingering in the process, each of which keeps
// a descriptor: past it the oldest go at once, down to half of it, so that
// a loop over fresh names wakes the sweeper once per lingerMax/2 names.
const lingerMax = 256

var lingerers struct {
	list    []*shared // in the order their linger began; guarded by sharedMu
	running bool      // the sweeper runs; guarded by sharedMu
	wake    time.Time // when the sweeper looks next; guarded by sharedMu
	kick    chan struct{}
}

// lingerState is a lingering file's: since when, and its watch.
type lingerState struct {
	since time.Time
	w     Watch
}

// linger begins the linger of sh, whose last handle was just released, and
// reports whether it did: a file forgotten (removed or replaced), or one of
// a namespace without linger, is reclaimed at once instead. The caller
// holds sharedMu.
func (sh *shared) linger() bool {
	if sh.lg != nil {
		// Taken up and released again before the sweeper looked: it
		// still lingers, forgotten meanwhile or not, and the sweeper
		// closes it (and only the sweeper, once).
		sh.lg.since = time.Now()
		return true
	}
	if sh.ns.lingerFor() == 0 || shareds[sharedKey{sh.ns.dir, sh.lay.Kind}][sh.name] != sh {
		return false
	}
	sh.lg = &lingerState{since: time.Now()}
	sh.maps.Add(1)
	sh.lg.w.Start(lingerCheck{sh}, nil)
	lingerers.list = append(lingerers.list, sh)
	switch {
	case !lingerers.running:
		lingerers.running = true
		lingerers.wake = sh.lg.since.Add(sh.ns.lingerFor())
		if lingerers.kick == nil {
			lingerers.kick = make(chan struct{}, 1)
		}
		go sweepLoop(sh.ns.lingerFor())
	case len(lingerers.list) > lingerMax || sh.lg.since.Add(sh.ns.lingerFor()).Before(lingerers.wake):
		// Over the bound, or a shorter linger (another namespace's)
		// than the sweeper waits for.
		select {
		case lingerers.kick <- struct{}{}:
		default:
		}
	}
	return true
}

// lingerDone is a file taken out of the linger to be reclaimed.
type lingerDone struct {
	sh *shared
	lg *lingerState
}

// end reclaims and closes the file.
func (d lingerDone) end() {
	d.lg.w.Stop()
	d.sh.finish()
	if d.sh.maps.Add(-1) == 0 {
		d.sh.unmap()
	}
}

func sweepLoop(first time.Duration) {
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-lingerers.kick:
		}
		due, wait, more := takeDue("", false, true)
		for _, d := range due {
			d.end()
		}
		if !more {
			return
		}
		t.Reset(wait)
	}
}

// takeDue takes out of the linger the files of the namespace directory dir
// ("" for every one) whose linger is over, or all of them when all is set,
// and the oldest past lingerMax (down to half of it); it ends the linger of files taken up
// again. It returns the files to reclaim (gone from the map of shared
// files: nobody joins them any more), how long until the next linger ends,
// and whether any is left. For the sweeper, none left ends its run.
func takeDue(dir string, all, sweeper bool) (due []lingerDone, wait time.Duration, more bool) {
	now := time.Now()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	l := lingerers.list
	over := 0
	if len(l) > lingerMax {
		over = len(l) - lingerMax/2
	}
	keep := l[:0]
	wait = time.Minute
	for _, sh := range l {
		left := sh.ns.lingerFor() - now.Sub(sh.lg.since)
		switch {
		case dir != "" && sh.ns.dir != dir:
			keep = append(keep, sh)
		case sh.opens > 0:
			// Its handles hold the mapping and follow the file.
			sh.lg.w.Stop()
			sh.lg = nil
			sh.maps.Add(-1)
			over--
		case all || over > 0 || left <= 0:
			due = append(due, lingerDone{sh, sh.lg})
			sh.lg = nil
			sh.leave()
			over--
		default:
			keep = append(keep, sh)
			wait = min(wait, left)
		}
	}
	clear(l[len(keep):])
	lingerers.list = keep
	if sweeper {
		lingerers.running = len(keep) > 0
		lingerers.wake = now.Add(wait)
	}
	return due, wait, len(keep) > 0
}

// ReclaimIdle ends at once the linger of the files of ns that no handle of
// the process has open: each is reclaimed if idle, or closed. A Backend's
// Close calls it, so that what it leaves behind is gone when it returns.
func ReclaimIdle(ns *Namespace) {
	due, _, _ := takeDue(ns.dir, true, false)
	for _, d := range due {
		d.end()
	}
}

// lingerCheck follows a lingering file (InodeChecker): once it is removed
// or replaced, new handles must not take it up.
type lingerCheck struct{ sh *shared }

func (c lingerCheck) CheckLoss() error {
	if !Named(c.sh.path(), uint64(c.sh.dev), c.sh.ino) {
		sharedMu.Lock()
		c.sh.leave()
		sharedMu.Unlock()
	}
	return nil
}

func (c lingerCheck) WatchedPath() string { return c.sh.path() }

func (c lingerCheck) WatchedInode() (dev, ino uint64) { return uint64(c.sh.dev), c.sh.ino }
