//go:build linux

package ipc

import (
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// NotifyExit calls its function when the process exits (not before), says
// dead at once for a process that is gone or another with its pid, and
// calls nothing after Stop.
func TestNotifyExit(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	p, _, ok, err := LookupProc(cmd.Process.Pid)
	if err != nil || !ok {
		t.Fatalf("LookupProc: %v %v", ok, err)
	}
	fired := make(chan struct{})
	w, dead, err := NotifyExit(p.PID, p.Tag(), ^uint32(0), func() { close(fired) })
	if err != nil || dead {
		t.Fatalf("NotifyExit of a live process: dead %v, %v", dead, err)
	}
	defer w.Stop()
	select {
	case <-fired:
		t.Fatal("fired while the process lives")
	case <-time.After(50 * time.Millisecond):
	}
	// Another start time: the recorded process is not this one.
	if w2, dead, err := NotifyExit(p.PID, p.Tag()+1, ^uint32(0), func() {}); !dead || err != nil || w2 != nil {
		t.Errorf("NotifyExit with another start time: dead %v, %v", dead, err)
	}
	stopped, dead, err := NotifyExit(p.PID, p.Tag(), ^uint32(0), func() { t.Error("a stopped watch fired") })
	if err != nil || dead {
		t.Fatal(dead, err)
	}
	stopped.Stop()
	stopped.Stop()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("not fired at the exit")
	}
	if _, dead, err := NotifyExit(p.PID, p.Tag(), ^uint32(0), func() {}); !dead || err != nil {
		t.Errorf("NotifyExit of an exited process: dead %v, %v", dead, err)
	}
}

// The watches of one process, NotifyExit's and a Waiter's watch of its
// exit, share one pidfd, and all are told of the exit.
func TestNotifyExitSharesOnePidfd(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	p, _, ok, err := LookupProc(cmd.Process.Pid)
	if err != nil || !ok {
		t.Fatalf("LookupProc: %v %v", ok, err)
	}
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := fds()
	var fired sync.WaitGroup
	for range 10 {
		fired.Add(1)
		w, dead, err := NotifyExit(p.PID, p.Tag(), ^uint32(0), fired.Done)
		if err != nil || dead {
			t.Fatalf("NotifyExit of a live process: dead %v, %v", dead, err)
		}
		defer w.Stop()
	}
	var wt Waiter
	defer wt.Close()
	if wt.WatchExit(p.PID) {
		t.Fatal("WatchExit: a live process counted as exited")
	}
	if n := fds() - before; n != 1 {
		t.Errorf("11 watches of one process opened %d files; want 1", n)
	}
	var word uint32
	slept := make(chan struct{})
	go func() {
		defer close(slept)
		_ = wt.Sleep(&word, 0)
	}()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	all := make(chan struct{})
	go func() { fired.Wait(); close(all) }()
	for _, c := range []chan struct{}{all, slept} {
		select {
		case <-c:
		case <-time.After(5 * time.Second):
			t.Fatal("a watch was not told of the exit")
		}
	}
}
