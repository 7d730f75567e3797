package ipc

import (
	"sync"
	"time"

	"github.com/batonlock/baton/driver"
)

const (
	// WatchEvery is how often watched objects are checked.
	WatchEvery = 100 * time.Millisecond
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
}

var watcher struct {
	mu      sync.Mutex
	set     []*Watch // guarded by mu
	running bool     // guarded by mu
}

// Start calls c.CheckLoss every WatchEvery until Stop is called, and fires
// loss with its error the first time it returns one. One goroutine serves
// every registration of the process; it ends shortly after the last one
// stops. A Watch is started at most once.
func (w *Watch) Start(c Checker, loss *driver.Loss) {
	w.c, w.loss = c, loss
	watcher.mu.Lock()
	w.i = len(watcher.set)
	watcher.set = append(watcher.set, w)
	if !watcher.running {
		watcher.running = true
		go watchLoop()
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
	last := len(watcher.set) - 1
	moved := watcher.set[last]
	watcher.set[w.i], moved.i = moved, w.i
	watcher.set[last] = nil
	watcher.set = watcher.set[:last]
	w.c = nil
}

type checkFunc func() error

func (f checkFunc) CheckLoss() error { return f() }

// WatchLoss is Start for a check function, on a Watch of its own.
func WatchLoss(check func() error, loss *driver.Loss) (stop func()) {
	w := new(Watch)
	w.Start(checkFunc(check), loss)
	return w.Stop
}

// watchChunk bounds the registrations copied out of watcher.set at a
// time, so that the loop's scratch does not grow with the handles open.
const watchChunk = 128

func watchLoop() {
	t := time.NewTicker(WatchEvery)
	defer t.Stop()
	var (
		idleSince time.Time
		ws        [watchChunk]*Watch
		cs        [watchChunk]Checker
	)
	for range t.C {
		watcher.mu.Lock()
		if len(watcher.set) == 0 {
			if idleSince.IsZero() {
				idleSince = time.Now()
			}
			if time.Since(idleSince) >= watchLinger {
				watcher.running = false
				watcher.mu.Unlock()
				return
			}
			watcher.mu.Unlock()
			continue
		}
		idleSince = time.Time{}
		// A Stop between chunks moves the last registration to the
		// stopped one's index, which this tick may have passed: that one
		// is checked at the next tick.
		for next := 0; next < len(watcher.set); {
			n := copy(ws[:], watcher.set[next:])
			for i, w := range ws[:n] {
				cs[i] = w.c
			}
			next += n
			watcher.mu.Unlock()
			for i, w := range ws[:n] {
				if w.loss.Err() == nil {
					if err := cs[i].CheckLoss(); err != nil {
						w.loss.Fire(err)
					}
				}
			}
			clear(ws[:n])
			clear(cs[:n])
			watcher.mu.Lock()
		}
		watcher.mu.Unlock()
	}
}
