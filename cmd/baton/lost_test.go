package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLostRedis pauses the Redis server past the lease TTL while a command
// runs: the command gets SIGTERM and baton exits 75.
func TestLostRedis(t *testing.T) {
	t.Parallel()
	url, srv := startRedis(t)
	for _, tc := range []struct {
		name   string
		onLost string
		trap   string
		want   string // what the command wrote
	}{
		{"term", "term", `trap 'echo term > "$1"; exit 0' TERM`, "term"},
		{"term-ignored-then-kill", "term", `trap '' TERM`, ""},
		{"kill", "kill", `trap 'echo term > "$1"; exit 0' TERM`, ""},
		{"ignore", "ignore", `trap 'echo term > "$1"; exit 0' TERM`, "done"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ready, got := filepath.Join(dir, "ready"), filepath.Join(dir, "got")
			// With ignore the command ends by itself 4 s after the pause.
			script := tc.trap + `; touch "$0"; i=0; ` +
				`while [ $i -lt 30 ]; do sleep 0.1; [ -e "$0.paused" ] && i=$((i+1)); done; echo done > "$1"`
			c := command(url, "run", "--ttl", "1s", "--grace", "1s", "--on-lost", tc.onLost, "lost/"+tc.name,
				"sh", "-c", script, ready, got)
			var errb bytes.Buffer
			c.Stderr = &errb
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			waitFile(t, ready, 20*time.Second)
			// Hold a while first: renewals must keep it past the TTL.
			time.Sleep(1500 * time.Millisecond)
			if _, err := os.Stat(got); err == nil {
				t.Fatalf("the command was stopped while the server ran: %s", errb.String())
			}
			if err := srv.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			paused := time.Now()
			if err := os.WriteFile(ready+".paused", nil, 0o644); err != nil {
				t.Fatal(err)
			}
			var err error
			switch tc.name {
			case "term":
				waitFile(t, got, 15*time.Second)
				t.Logf("SIGTERM reached the command %v after the pause", time.Since(paused).Round(time.Millisecond))
				// Let the release go through once the loss is seen.
				time.Sleep(200 * time.Millisecond)
				_ = srv.Signal(syscall.SIGCONT)
				err = waitTimeout(c, 30*time.Second)
			case "ignore":
				time.Sleep(2500 * time.Millisecond) // past the 1 s TTL
				_ = srv.Signal(syscall.SIGCONT)
				err = waitTimeout(c, 30*time.Second)
			default:
				// The server stays paused: baton must not wait for it
				// longer than its release bound.
				err = waitTimeout(c, 30*time.Second)
				_ = srv.Signal(syscall.SIGCONT)
			}
			t.Logf("baton ended %v after the pause", time.Since(paused).Round(time.Millisecond))
			if code := exitCode(err); code != 75 {
				t.Errorf("exit %d (%v), want 75; stderr %q", code, err, errb.String())
			}
			b, _ := os.ReadFile(got)
			if s := strings.TrimSpace(string(b)); s != tc.want {
				t.Errorf("the command wrote %q, want %q; stderr %q", s, tc.want, errb.String())
			}
			if !strings.Contains(errb.String(), "was lost") {
				t.Errorf("stderr does not report the loss: %q", errb.String())
			}
		})
	}
}
