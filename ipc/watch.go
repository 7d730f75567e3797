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

// watched is one registration: a check and the loss it fires.
type watched struct {
	check func() error
	loss  *driver.Loss
}

var watcher struct {
	mu      sync.Mutex
	set     map[*watched]struct{} // guarded by mu
	running bool                  // guarded by mu
}

// WatchLoss calls check every WatchEvery until stop is called, and fires
// loss with check's error the first time it returns one (the object behind
// a hold was removed or replaced). One goroutine serves every registration
// of the process; it ends shortly after the last one stops.
func WatchLoss(check func() error, loss *driver.Loss) (stop func()) {
	w := &watched{check: check, loss: loss}
	watcher.mu.Lock()
	if watcher.set == nil {
		watcher.set = make(map[*watched]struct{})
	}
	watcher.set[w] = struct{}{}
	if !watcher.running {
		watcher.running = true
		go watchLoop()
	}
	watcher.mu.Unlock()
	return func() {
		watcher.mu.Lock()
		delete(watcher.set, w)
		watcher.mu.Unlock()
	}
}

func watchLoop() {
	t := time.NewTicker(WatchEvery)
	defer t.Stop()
	var idleSince time.Time
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
		ws := make([]*watched, 0, len(watcher.set))
		for w := range watcher.set {
			ws = append(ws, w)
		}
		watcher.mu.Unlock()
		for _, w := range ws {
			if w.loss.Err() != nil {
				continue
			}
			if err := w.check(); err != nil {
				w.loss.Fire(err)
			}
		}
	}
}
