//go:build linux

package ipc

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton/driver"
)

// TestWatchFileLossFollowsLinks: a watch of a file fires when the file is
// removed or another file is renamed over it, well before the watcher's
// periodic check of such files (inotify tells it), and not when the file
// is only touched.
func TestWatchFileLossFollowsLinks(t *testing.T) {
	for _, how := range []string{"remove", "replace", "touch"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			var st unix.Stat_t
			if err := unix.Stat(path, &st); err != nil {
				t.Fatal(err)
			}
			gone := errors.New("gone")
			loss := driver.NewLoss()
			stop := WatchFileLoss(path, func() error {
				var now unix.Stat_t
				if err := unix.Stat(path, &now); err != nil || now.Ino != st.Ino {
					return gone
				}
				return nil
			}, loss)
			defer stop()
			switch how {
			case "remove":
				os.Remove(path)
			case "replace":
				os.WriteFile(path+".new", nil, 0o600)
				os.Rename(path+".new", path)
			case "touch":
				now := time.Now()
				os.Chtimes(path, now, now)
			}
			deadline := time.Now().Add(watchSafety / 4)
			for loss.Err() == nil && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			fired := errors.Is(loss.Err(), gone)
			if fired != (how != "touch") {
				t.Fatalf("%s: loss %v", how, loss.Err())
			}
		})
	}
}
