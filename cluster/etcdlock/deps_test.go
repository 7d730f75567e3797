package etcdlock

import (
	"os/exec"
	"strings"
	"testing"
)

// A program that imports the package links the etcd client, not the server.
func TestNoServerDependency(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/batonlock/baton/cluster/etcdlock").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := string(out)
	if !strings.Contains(deps, "go.etcd.io/etcd/client/v3\n") {
		t.Errorf("the client is not among the dependencies:\n%s", deps)
	}
	for _, d := range strings.Split(deps, "\n") {
		if strings.HasPrefix(d, "go.etcd.io/etcd/server/") {
			t.Errorf("the package links the etcd server: %s", d)
		}
	}
}
