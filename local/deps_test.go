package local_test

import (
	"os/exec"
	"strings"
	"testing"
)

// A program that opens local: through baton.Open and imports only local
// links no client of a network backend: the backends register their
// schemes from their own packages.
func TestOpenLinksNoNetworkClient(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go command on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "./testdata/onlylocal").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Split(string(out), "\n")
	found := false
	for _, d := range deps {
		if d == "github.com/batonlock/baton/local" {
			found = true
		}
		for _, banned := range []string{
			"github.com/redis/", "go.etcd.io/", "google.golang.org/grpc", "github.com/jackc/",
			"github.com/go-sql-driver/", "github.com/go-zookeeper/", "github.com/batonlock/baton/cluster/",
		} {
			if strings.HasPrefix(d, banned) {
				t.Errorf("the same-host program links %s", d)
			}
		}
	}
	if !found {
		t.Errorf("go list shows no local package; the check proves nothing:\n%s", out)
	}
}
