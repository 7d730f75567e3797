//go:build linux

package ipc

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// sleepOn runs w.Sleep on word (value 0) in a goroutine and returns a
// channel closed when it returns.
func sleepOn(t *testing.T, w *Waiter, word *uint32) chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Sleep(word, 0); err != nil {
			t.Error(err)
		}
	}()
	return done
}

func mustStay(t *testing.T, done chan struct{}, d time.Duration, why string) {
	t.Helper()
	select {
	case <-done:
		t.Fatalf("Sleep returned %s", why)
	case <-time.After(d):
	}
}

func mustEnd(t *testing.T, done chan struct{}, why string) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("Sleep did not return %s", why)
	}
	return time.Since(start)
}

// TestWaiterWatchesExit: a Sleep ends when a watched process exits, with
// nobody waking the word, and Watch then reports it dead.
func TestWaiterWatchesExit(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep(1): %v", err)
	}
	defer cmd.Wait()
	p, _, ok, err := LookupProc(cmd.Process.Pid)
	if !ok || err != nil {
		t.Fatalf("LookupProc(child) = %v %v", ok, err)
	}
	var w Waiter
	defer w.Close()
	if w.Watch(p.PID, p.Tag()+1) != true {
		t.Fatal("a pid with another start time was watched as alive")
	}
	if w.Watch(p.PID, p.Tag()) {
		t.Fatal("running child watched as dead")
	}
	word := new(uint32)
	done := sleepOn(t, &w, word)
	mustStay(t, done, 50*time.Millisecond, "with the child alive")
	cmd.Process.Kill()
	d := mustEnd(t, done, "when the watched child was killed")
	t.Logf("kill to wake-up: %v", d)
	if !w.Watch(p.PID, p.Tag()) {
		t.Fatal("killed child still watched as alive")
	}
}

// TestWaiterRing: a Ring before the Sleep ends it at once, a Ring during
// it ends it, and a Ring wakes only its own Waiter, not another sleeper on
// the same word.
func TestWaiterRing(t *testing.T) {
	word := new(uint32)
	var a, b Waiter
	a.Ring()
	mustEnd(t, sleepOn(t, &a, word), "after an earlier Ring")
	da, db := sleepOn(t, &a, word), sleepOn(t, &b, word)
	mustStay(t, da, 20*time.Millisecond, "without a wake")
	a.Ring()
	mustEnd(t, da, "when rung")
	mustStay(t, db, 20*time.Millisecond, "when another Waiter was rung")
	b.Ring()
	mustEnd(t, db, "when rung")
}

// TestWaiterSharesPidfd: two Waiters of a process watching one process
// share one watch, which goes with the last of them.
func TestWaiterSharesPidfd(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep(1): %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	p, _, _, _ := LookupProc(cmd.Process.Pid)
	var a, b Waiter
	a.Watch(p.PID, p.Tag())
	b.Watch(p.PID, p.Tag())
	k := procKey{pid: p.PID, tag: p.Tag(), mask: fullTag}
	exits.mu.Lock()
	e := exits.m[k]
	n := 0
	if e != nil {
		n = len(e.subs)
	}
	exits.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d subscribers of one watch; want 2", n)
	}
	a.Close()
	b.Close()
	exits.mu.Lock()
	left := exits.m[k]
	exits.mu.Unlock()
	if left != nil {
		t.Fatal("watch kept after its last Waiter closed")
	}
}

// TestWaiterKeepsFewOldWatches: watches of processes not watched since the
// last sleep go once more than keepWatches are kept.
func TestWaiterKeepsFewOldWatches(t *testing.T) {
	var cmds []*exec.Cmd
	defer func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	}()
	var w Waiter
	defer w.Close()
	word := new(uint32)
	*word = 1
	for range keepWatches + 4 {
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			t.Skipf("no sleep(1): %v", err)
		}
		cmds = append(cmds, c)
		p, _, _, _ := LookupProc(c.Process.Pid)
		w.Watch(p.PID, p.Tag())
		w.Sleep(word, 0) // returns at once: the word is not 0
	}
	if n := len(w.watches); n > keepWatches+1 {
		t.Fatalf("%d watches kept; want at most %d", n, keepWatches+1)
	}
}

// Without pidfds, a Waiter that watches a flock holder's exit at each look
// keeps one /proc watch of it, not one more open file per look.
func TestWaiterWatchExitInSlicesKeepsOneWatch(t *testing.T) {
	noPidfd.Store(true)
	defer noPidfd.Store(false)
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	var w Waiter
	defer w.Close()
	before := fds()
	for range 10 {
		if w.WatchExit(cmd.Process.Pid) {
			t.Fatal("WatchExit: a live process counted as exited")
		}
	}
	if n := fds() - before; n > 1 {
		t.Errorf("10 looks at one live process opened %d files; want 1", n)
	}
}
