package redislock

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/batonlock/baton/cluster/redislock/internal/luagen"
)

// TestScriptsGenerated fails when a script in scripts/ differs from what
// go generate assembles from scripts/src.
func TestScriptsGenerated(t *testing.T) {
	want, err := luagen.Generate(os.DirFS("scripts/src"))
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		t.Fatal("no script in scripts/src")
	}
	for name, w := range want {
		got, err := os.ReadFile(filepath.Join("scripts", name))
		if err != nil || !bytes.Equal(got, w) {
			t.Errorf("scripts/%s is stale (%v): run go generate ./cluster/redislock", name, err)
		}
	}
}
