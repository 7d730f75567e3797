//go:build linux

package ipc

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
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

// inodeCheck is an InodeChecker for tests.
type inodeCheck struct {
	path     string
	dev, ino uint64
	check    func() error
}

func (c inodeCheck) CheckLoss() error                { return c.check() }
func (c inodeCheck) WatchedPath() string             { return c.path }
func (c inodeCheck) WatchedInode() (dev, ino uint64) { return c.dev, c.ino }

// TestInodeWatchShared: a second registration on a file the process
// follows already shares its watch without asking the kernel (its path
// here names nothing, so a watch by path would fail), both see the file's
// removal, and the watch goes with the last of them.
func TestInodeWatchShared(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	gone := errors.New("gone")
	check := func() error {
		var now unix.Stat_t
		if err := unix.Stat(path, &now); err != nil || now.Ino != st.Ino {
			return gone
		}
		return nil
	}
	var w1, w2 Watch
	l1, l2 := driver.NewLoss(), driver.NewLoss()
	w1.Start(inodeCheck{path, uint64(st.Dev), st.Ino, check}, l1)
	w2.Start(inodeCheck{path + ".nothing", uint64(st.Dev), st.Ino, check}, l2)
	defer w1.Stop()
	defer w2.Stop()
	if w1.wd < 0 || w2.wd != w1.wd {
		t.Fatalf("watch descriptors %d and %d; want one shared", w1.wd, w2.wd)
	}
	os.Remove(path)
	deadline := time.Now().Add(watchSafety / 4)
	for (l1.Err() == nil || l2.Err() == nil) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(l1.Err(), gone) || !errors.Is(l2.Err(), gone) {
		t.Fatalf("after the removal: losses %v and %v", l1.Err(), l2.Err())
	}
	w1.Stop()
	w2.Stop()
	watcher.mu.Lock()
	defer watcher.mu.Unlock()
	if _, ok := inotify.byIno[[2]uint64{uint64(st.Dev), st.Ino}]; ok {
		t.Fatal("the file's watch is still known after its last registration stopped")
	}
}

// TestNamedUnlinked: a path that still leads to the file after its unlink
// (here its descriptor's link in /proc, as the kernel's name cache does
// for a moment after inotify reports the unlink) does not name it.
func TestNamedUnlinked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	dev, ino := uint64(st.Dev), st.Ino
	fdPath := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	if !Named(path, dev, ino) || !Named(fdPath, dev, ino) {
		t.Fatal("a linked file is not named by its paths")
	}
	if Named(path, dev, ino+1) {
		t.Fatal("a path names another inode")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if Named(path, dev, ino) || Named(fdPath, dev, ino) {
		t.Fatal("an unlinked file is still named")
	}
}

// TestUnlinkFiresLossEveryTime: the check that inotify's unlink event
// wakes runs while the kernel may still resolve the old path; every one of
// many removals is reported all the same, well before the periodic check.
func TestUnlinkFiresLossEveryTime(t *testing.T) {
	dir := t.TempDir()
	gone := errors.New("gone")
	for i := range 300 {
		path := filepath.Join(dir, "f"+strconv.Itoa(i))
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		loss := driver.NewLoss()
		stop := WatchFileLoss(path, func() error {
			if !Named(path, uint64(st.Dev), st.Ino) {
				return gone
			}
			return nil
		}, loss)
		os.Remove(path)
		select {
		case <-loss.Done():
		case <-time.After(watchSafety / 4):
			t.Fatalf("removal %d: no loss", i)
		}
		stop()
		f.Close()
	}
}

type chanRinger chan struct{}

func (c chanRinger) Ring() {
	select {
	case c <- struct{}{}:
	default:
	}
}

// TestWakeOnClose: while registered, every release of a description of
// the followed file rings (here another open and close of it); after
// stop, none does, and the file's watch reports removals as before.
func TestWakeOnClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	gone := errors.New("gone")
	var w Watch
	loss := driver.NewLoss()
	w.Start(inodeCheck{"/proc/self/fd/" + strconv.Itoa(int(f.Fd())), uint64(st.Dev), st.Ino, func() error {
		if !Named(path, uint64(st.Dev), st.Ino) {
			return gone
		}
		return nil
	}}, loss)
	defer w.Stop()
	rung := make(chanRinger, 1)
	stop, ok := w.WakeOnClose(rung)
	if !ok {
		t.Fatal("WakeOnClose on a file inotify follows: not ok")
	}
	closeOne := func() {
		g, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		g.Close()
	}
	closeOne()
	select {
	case <-rung:
	case <-time.After(watchSafety / 4):
		t.Fatal("no ring after a close of the file")
	}
	stop()
	closeOne()
	select {
	case <-rung:
		t.Fatal("a ring after stop")
	case <-time.After(50 * time.Millisecond):
	}
	if loss.Err() != nil {
		t.Fatalf("closes fired the loss: %v", loss.Err())
	}
	os.Remove(path)
	select {
	case <-loss.Done():
	case <-time.After(watchSafety / 4):
		t.Fatal("the removal was not reported after the close wake-ups")
	}
}
