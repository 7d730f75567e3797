//go:build linux

package filelock

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton"
)

const (
	// watchEvery is how often held lock files are checked for removal or
	// replacement.
	watchEvery = 100 * time.Millisecond
	// watchLinger keeps the watcher goroutine alive this long after the last
	// hold ends, so that lock/unlock in a loop does not start one each time.
	watchLinger = 300 * time.Millisecond
)

// watched is one held lock file under watch.
type watched struct {
	path     string
	dev, ino uint64
	loss     *baton.Loss
}

var watcher struct {
	mu      sync.Mutex
	set     map[*watched]struct{} // guarded by mu
	running bool                  // guarded by mu
}

func watchFile(path string, dev, ino uint64, loss *baton.Loss) *watched {
	w := &watched{path: path, dev: dev, ino: ino, loss: loss}
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
	return w
}

func (w *watched) stop() {
	watcher.mu.Lock()
	delete(watcher.set, w)
	watcher.mu.Unlock()
}

func (w *watched) current() bool {
	var st unix.Stat_t
	if err := unix.Stat(w.path, &st); err != nil {
		return false
	}
	return uint64(st.Dev) == w.dev && st.Ino == w.ino
}

func watchLoop() {
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	idleSince := time.Time{}
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
			if !w.current() {
				w.loss.Fire(errFileGone)
			}
		}
	}
}
