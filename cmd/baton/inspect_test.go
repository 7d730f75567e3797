package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/redislock"
)

func decodeReport(t *testing.T, s string) jsonReport {
	t.Helper()
	var rep jsonReport
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	if rep.Schema != jsonSchema {
		t.Fatalf("schema %d, want %d", rep.Schema, jsonSchema)
	}
	return rep
}

func TestStatusLsRm(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	stop := holder(t, ns, "jobs/nightly")
	if r := run(t, ns, "sem", "-j", "2", "done", "true"); r.code != 0 {
		t.Fatalf("sem: exit %d, stderr %q", r.code, r.stderr)
	}
	semHolder(t, ns, "2", "gpu")

	r := run(t, ns, "status", "--json", "jobs/nightly")
	if r.code != 0 {
		t.Fatalf("status: exit %d, stderr %q", r.code, r.stderr)
	}
	rep := decodeReport(t, r.stdout)
	if rep.Backend != ns || len(rep.Objects) != 1 {
		t.Fatalf("status report %+v", rep)
	}
	o := rep.Objects[0]
	if o.Name != "jobs/nightly" || o.Kind != "rwmutex" || o.Backend != "local" || len(o.Holders) != 1 || o.Holders[0].Mode != "exclusive" {
		t.Errorf("status of a held lock: %+v", o)
	}

	r = run(t, ns, "status", "jobs/nightly")
	if r.code != 0 || !strings.Contains(r.stdout, "held by") || !strings.Contains(r.stdout, "exclusive") {
		t.Errorf("status text: exit %d, %q", r.code, r.stdout)
	}
	// The backend's raw state is for --json; the text speaks in words.
	for _, name := range []string{"jobs/nightly", "gpu"} {
		text := run(t, ns, "status", name).stdout
		for _, raw := range []string{"0x", "state", "tickets", "semid"} {
			if strings.Contains(text, raw) {
				t.Errorf("status %s shows raw internals (%q):\n%s", name, raw, text)
			}
		}
		if rep := decodeReport(t, run(t, ns, "status", "--json", name).stdout); len(rep.Objects) != 1 || rep.Objects[0].Detail == "" {
			t.Errorf("status --json %s lacks the backend's detail: %+v", name, rep.Objects)
		}
	}

	r = run(t, ns, "ls", "--json")
	if r.code != 0 {
		t.Fatalf("ls: exit %d, stderr %q", r.code, r.stderr)
	}
	rep = decodeReport(t, r.stdout)
	kinds := map[string]string{}
	for _, o := range rep.Objects {
		kinds[o.Name] = string(o.Kind)
		if o.Name == "gpu" && (o.Capacity != 2 || len(o.Holders) != 1) {
			t.Errorf("ls: semaphore gpu: %+v", o)
		}
	}
	// "done" was given back by a command that ended: ls shows what
	// exists, and its name is reclaimed.
	if kinds["jobs/nightly"] != "rwmutex" || kinds["gpu"] != "semaphore" || kinds["done"] != "" {
		t.Errorf("ls lists %v", kinds)
	}
	r = run(t, ns, "ls")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "NAME") || !strings.Contains(r.stdout, "jobs/nightly") || !strings.Contains(r.stdout, "semaphore/2") {
		t.Errorf("ls text: exit %d, %q", r.code, r.stdout)
	}

	if r := run(t, ns, "__complete", "status", "jobs/"); r.code != 0 || !strings.Contains(r.stdout, "jobs/nightly\n") || strings.Contains(r.stdout, "gpu") {
		t.Errorf("name completion of jobs/: exit %d, %q", r.code, r.stdout)
	}
	if r := run(t, ns, "status", "nothing/here"); r.code != 1 || !strings.Contains(r.stderr, "no object") {
		t.Errorf("status of a missing name: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := run(t, ns, "status", "--json", "nothing/here"); r.code != 1 || len(decodeReport(t, r.stdout).Objects) != 0 {
		t.Errorf("status --json of a missing name: exit %d, %q", r.code, r.stdout)
	}

	if code := stop(); code != 143 {
		t.Errorf("holder ended with %d", code)
	}
	// Free, with no handle open, the lock is reclaimed.
	if r := run(t, ns, "status", "--json", "jobs/nightly"); r.code != 1 || len(decodeReport(t, r.stdout).Objects) != 0 {
		t.Errorf("status of a lock given back: exit %d, %q", r.code, r.stdout)
	}
	if r := run(t, ns, "rm", "--kind", "rwmutex", "gpu"); r.code != 1 {
		t.Errorf("rm of a kind the name does not have: exit %d", r.code)
	}
	if r := run(t, ns, "rm", "--force", "--kind", "semaphore", "gpu"); r.code != 0 {
		t.Errorf("rm gpu: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := run(t, ns, "status", "gpu"); r.code != 1 {
		t.Errorf("status after rm: exit %d, stdout %q", r.code, r.stdout)
	}
	r = run(t, ns, "ls", "--json")
	if rep := decodeReport(t, r.stdout); len(rep.Objects) != 0 {
		t.Errorf("ls after rm: %+v", rep.Objects)
	}
}

// TestLsRedis: ls on Redis lists, or says clearly that the backend cannot.
func TestLsRedis(t *testing.T) {
	t.Parallel()
	url, _ := startRedis(t)
	b, err := redislock.OpenURL(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	_, lists := b.(baton.Inspector)
	b.Close()
	r := run(t, url, "ls", "--json")
	switch {
	case lists && r.code == 0:
		decodeReport(t, r.stdout)
	case lists:
		t.Errorf("ls: exit %d, stderr %q", r.code, r.stderr)
	case r.code != 70 || !strings.Contains(r.stderr, "not supported"):
		t.Errorf("ls on a backend without listing: exit %d, stderr %q; want 70 and a clear message", r.code, r.stderr)
	}
}

// semHolder runs "baton sem -j j name" on a command that holds its permit
// until the test ends, and returns once it holds.
func semHolder(t *testing.T, backend, j, name string) {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	c := command(backend, "sem", "-j", j, name, "sh", "-c", `touch "$0"; exec sleep 60`, ready)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Process.Signal(syscall.SIGTERM)
		_ = waitTimeout(c, 20*time.Second)
	})
	waitFile(t, ready, 20*time.Second)
}
