//go:build linux

package main

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// ownLines fails the test unless every line of stderr is one of baton's
// own ("baton: ..."), without a logger's time or level.
func ownLines(t *testing.T, what, stderr string) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimRight(stderr, "\n"), "\n") {
		if !strings.HasPrefix(l, "baton: ") || strings.Contains(l, "level=") || strings.Contains(l, ".go:") {
			t.Errorf("%s: a line that is not baton's own: %q\nstderr:\n%s", what, l, stderr)
			return
		}
	}
}

// TestOneLogStream: against a Redis that cannot be reached, the client
// library's own log lines (failed dials) do not reach standard error: a -n
// run prints one line, a -v run only lines of baton's form, and baton serve
// none of the library's at its refreshes.
func TestOneLogStream(t *testing.T) {
	t.Parallel()
	u := closedRedis(t)
	r := run(t, u, "run", "-n", "x", "true")
	if r.code != exitBackend || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("run -n: exit %d, stderr %q; want 70 and one line", r.code, r.stderr)
	}
	ownLines(t, "run -n", r.stderr)
	r = run(t, u, "run", "-v", "-w", "2", "x", "true")
	if r.code != exitBackend {
		t.Errorf("run -v -w 2: exit %d, stderr %q; want 70", r.code, r.stderr)
	}
	ownLines(t, "run -v", r.stderr)

	c := command(u, "serve", "--http", "127.0.0.1:0")
	var errb syncBuffer
	c.Stderr = &errb
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	stopCmd(t, c)
	re := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+)/`)
	var base string
	for deadline := time.Now().Add(20 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(errb.String()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		t.Fatalf("baton serve did not say where it listens: %q", errb.String())
	}
	for i := 0; i < 3; i++ {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "baton_inspect_up 0") {
			t.Errorf("/metrics with the backend down: %s\n%s", resp.Status, body)
		}
		resp, err = http.Get(base + "/api/objects")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	ownLines(t, "serve", errb.String())
}

// TestLineHandler: the records of the backends' loggers come out as
// baton's lines, below Warn not at all.
func TestLineHandler(t *testing.T) {
	var b strings.Builder
	l := slog.New(&lineHandler{w: &b, mu: new(sync.Mutex), level: slog.LevelWarn})
	l.Info("not shown")
	l.With("backend", "redis").WithGroup("lease").Warn("renewal failed", "name", "jobs/a", "err", errors.New("i/o timeout"))
	want := `baton: renewal failed backend=redis lease.name=jobs/a lease.err="i/o timeout"` + "\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
