package local_test

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
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

// A bad local URL is refused with the accepted forms and creates nothing.
func TestOpenURLBadCreatesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ns")
	for _, u := range []string{
		"local://" + dir + "?mutex=flock", "local://" + dir + "#x", "local://user@" + dir,
		"local://otherhost" + dir, "file:", "local:relative", "redis://" + dir,
	} {
		b, err := local.OpenURL(u)
		if err == nil {
			b.Close()
			t.Errorf("OpenURL(%q) succeeded", u)
			continue
		}
		if !errors.Is(err, baton.ErrInvalidArgument) || !strings.Contains(err.Error(), "local:///DIR") {
			t.Errorf("OpenURL(%q) = %v", u, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("OpenURL(%q) created %s", u, dir)
		}
	}
	for _, u := range []string{"local://" + dir, "file://localhost" + dir + "/", "LOCAL://" + dir + "/../ns"} {
		got, err := local.ParseURL(u)
		if err != nil || got != dir {
			t.Errorf("ParseURL(%q) = %q, %v; want %q", u, got, err, dir)
		}
	}
	if got, err := local.ParseURL("local:"); err != nil || got != "" {
		t.Errorf(`ParseURL("local:") = %q, %v`, got, err)
	}
}
