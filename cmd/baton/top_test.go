package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTopInTmux runs baton top in a terminal (a tmux session on a server of
// its own) while one baton holds a lock and another waits: the screen
// shows the holder's pid on the lock's line with one waiter and the owner
// of a Mutex held under an Owner, the n key sorts by name, and q quits.
func TestTopInTmux(t *testing.T) {
	tmux := needTool(t, "tmux")
	s := startLiveScene(t)
	sock := fmt.Sprintf("baton-top-%d", os.Getpid())
	tm := func(args ...string) (string, error) {
		out, err := exec.Command(tmux, append([]string{"-L", sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() { _, _ = tm("kill-server") })
	shell := fmt.Sprintf("BATON_BACKEND=%s %s top --interval 200ms; sleep 30", s.backend, batonBin)
	if out, err := tm("new-session", "-d", "-s", "top", "-x", "150", "-y", "30", shell); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	screen := func(want func(string) bool, what string) string {
		t.Helper()
		var last string
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			out, err := tm("capture-pane", "-p", "-t", "top")
			if err != nil {
				t.Fatalf("tmux capture-pane: %v\n%s", err, out)
			}
			if last = out; want(out) {
				return out
			}
		}
		t.Fatalf("the screen never showed %s:\n%s", what, last)
		return ""
	}
	pid := strconv.Itoa(s.pid)
	got := screen(func(sc string) bool {
		for _, l := range strings.Split(sc, "\n") {
			f := strings.Fields(l)
			// NAME KIND WAITERS PID ...
			if len(f) >= 4 && f[0] == s.name && f[2] == "1" && f[3] == pid {
				return true
			}
		}
		return false
	}, fmt.Sprintf("%s with 1 waiter held by pid %s", s.name, pid))
	// NAME KIND WAITERS PID HOST OWNER: the Mutex this process holds shows
	// its owner.
	mine := strconv.Itoa(os.Getpid())
	got = screen(func(sc string) bool {
		for _, l := range strings.Split(sc, "\n") {
			if f := strings.Fields(l); len(f) >= 6 && f[0] == s.owned && f[3] == mine && f[5] == s.owner {
				return true
			}
		}
		return false
	}, fmt.Sprintf("%s held by owner %s of pid %s", s.owned, s.owner, mine))
	if !strings.Contains(got, "OWNER") {
		t.Errorf("the screen lacks the OWNER column:\n%s", got)
	}
	if !strings.Contains(got, "sort: wait") || !strings.Contains(got, "1 waiting") {
		t.Errorf("the screen lacks the header:\n%s", got)
	}
	if f := docsFile("top.txt"); f != "" {
		if err := os.WriteFile(f, []byte(strings.TrimRight(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := tm("send-keys", "-t", "top", "n"); err != nil {
		t.Fatalf("tmux send-keys: %v\n%s", err, out)
	}
	screen(func(sc string) bool { return strings.Contains(sc, "sort: name") }, "sort: name after the n key")
	if out, err := tm("send-keys", "-t", "top", "q"); err != nil {
		t.Fatalf("tmux send-keys: %v\n%s", err, out)
	}
	// After q, top has ended and the shell sleeps: the screen stops
	// changing, its clock with it.
	first := screen(func(string) bool { return true }, "anything")
	time.Sleep(1200 * time.Millisecond)
	if again := screen(func(string) bool { return true }, "anything"); again != first {
		t.Errorf("baton top still refreshes after q:\n%s", again)
	}
}
