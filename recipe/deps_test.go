package recipe_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The recipes import no backend: a same-host program links no network
// client through them.
func TestImportsOnlyTheRootPackage(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/batonlock/baton/recipe").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, d := range strings.Split(string(out), "\n") {
		if strings.Contains(d, "redis") || strings.Contains(d, "etcd") || strings.Contains(d, "grpc") ||
			strings.HasPrefix(d, "github.com/batonlock/baton/") && !strings.HasPrefix(d, "github.com/batonlock/baton/internal/") && d != "github.com/batonlock/baton/recipe" && d != "github.com/batonlock/baton/driver" {
			t.Errorf("package recipe depends on %s", d)
		}
	}
}
