package fence_test

import (
	"os/exec"
	"strings"
	"testing"
)

// A same-host program that imports the package links no network client and
// nothing of the cluster backends.
func TestNoNetworkDependency(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/batonlock/baton/fence").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, d := range strings.Split(string(out), "\n") {
		if strings.Contains(d, ".") && !strings.HasPrefix(d, "github.com/batonlock/baton") ||
			strings.HasPrefix(d, "github.com/batonlock/baton/cluster") || d == "net" || strings.HasPrefix(d, "net/") {
			t.Errorf("the package links %s", d)
		}
	}
}
