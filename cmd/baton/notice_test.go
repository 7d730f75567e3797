package main

import (
	"strings"
	"testing"
)

// TestRestartWaitSaid: on a Redis server that started empty, baton says
// that it waits for the server's restart-safety wait, and for how long,
// rather than staying silent; -n and a -w that runs out name that wait,
// not a busy lock.
func TestRestartWaitSaid(t *testing.T) {
	url, _ := startRedis(t)
	url += "?ttl=1500ms"
	r := run(t, url, "run", "-n", "fresh", "true")
	if r.code != exitBackend || !strings.Contains(r.stderr, "started empty and may have lost grants") || strings.Contains(r.stderr, "busy") {
		t.Fatalf("run -n on a fresh server: exit %d, stderr %q; want %d naming the restart-safety wait", r.code, r.stderr, exitBackend)
	}
	r = run(t, url, "run", "-w", "200ms", "fresh", "true")
	if r.code != exitBackend || !strings.Contains(r.stderr, "started empty") || strings.Contains(r.stderr, "busy") {
		t.Fatalf("run -w 200ms on a fresh server: exit %d, stderr %q; want %d naming the restart-safety wait", r.code, r.stderr, exitBackend)
	}
	r = run(t, url, "run", "fresh", "true")
	if r.code != 0 || strings.Count(r.stderr, "baton: waiting up to ") != 1 || !strings.Contains(r.stderr, "started empty and may have lost grants; see ") {
		t.Fatalf("run on a fresh server: exit %d, stderr %q; want 0 and one notice of the wait", r.code, r.stderr)
	}
	t.Logf("stderr: %s", r.stderr)
}
