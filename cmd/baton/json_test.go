package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton/ipc"
)

// TestJSONTokenExact: tokens above 2^53 (same-host RW locks draw them near
// 1.8e18) come out of status and ls --json as decimal strings, exactly, so
// that readers keeping JSON numbers as doubles do not round them.
func TestJSONTokenExact(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	seedToken(t, ns, "json/big", 1<<60)
	tokFile := filepath.Join(t.TempDir(), "token")
	c := command(ns, "run", "json/big", "sh", "-c", `echo "$BATON_TOKEN" > "$0.tmp" && mv "$0.tmp" "$0" && exec sleep 60`, tokFile)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Process.Signal(syscall.SIGTERM)
		_ = waitTimeout(c, 20*time.Second)
	})
	waitFile(t, tokFile, 20*time.Second)
	raw, err := os.ReadFile(tokFile)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(string(raw))
	tok, err := strconv.ParseUint(want, 10, 64)
	if err != nil {
		t.Fatalf("BATON_TOKEN %q: %v", want, err)
	}
	if tok <= 1<<53 {
		t.Fatalf("token %d is not above 2^53; the test needs one that is", tok)
	}

	for _, args := range [][]string{{"status", "--json", "json/big"}, {"ls", "--json"}} {
		r := run(t, ns, args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
		var doc map[string]any
		dec := json.NewDecoder(strings.NewReader(r.stdout))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("%v: %v in %q", args, err, r.stdout)
		}
		if n, ok := doc["schema"].(json.Number); !ok || n.String() != "2" {
			t.Errorf("%v: schema %v, want 2", args, doc["schema"])
		}
		var found bool
		for _, o := range doc["objects"].([]any) {
			obj := o.(map[string]any)
			if lt, ok := obj["last_token"]; ok {
				if _, isStr := lt.(string); !isStr {
					t.Errorf("%v: last_token %v is a %T, not a string", args, lt, lt)
				}
			}
			if obj["name"] != "json/big" {
				continue
			}
			hs := obj["holders"].([]any)
			if len(hs) != 1 {
				t.Fatalf("%v: holders %v", args, hs)
			}
			got := hs[0].(map[string]any)["token"]
			if got != want {
				t.Errorf("%v: token %v (%T), want the string %q", args, got, got, want)
			}
			found = true
		}
		if !found {
			t.Errorf("%v: json/big not in %s", args, r.stdout)
		}
	}
}

// seedToken makes the fencing counter of the same-host lock name in ns
// start at last, as for a name that has served that many writers: it
// raises the namespace's token floor, from which a new file counts on.
func seedToken(t *testing.T, backend, name string, last uint64) {
	t.Helper()
	// The namespace's token floor: a name's new file counts on from it.
	ns, err := ipc.OpenNamespace(strings.TrimPrefix(backend, "local://"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := ipc.TokenFloor(ns)
	if err != nil {
		t.Fatal(err)
	}
	ipc.RaiseFloor(f, last)
}
