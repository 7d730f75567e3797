package fence_test

import (
	"os/exec"
	"strings"
	"testing"
)

// A same-host program that imports the package links no network client and
// nothing of the cluster backends: no module but golang.org/x/sys, neither
// package net nor TLS nor HTTP (net/url and net/netip, which parse, come
// with the root package's Open).
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
		first, _, _ := strings.Cut(d, "/")
		thirdParty := strings.Contains(first, ".") && !strings.HasPrefix(d, "github.com/batonlock/baton") &&
			!strings.HasPrefix(d, "golang.org/x/sys/") // the OS layer every same-host package uses
		if thirdParty ||
			strings.HasPrefix(d, "github.com/batonlock/baton/cluster") || d == "net" || strings.HasPrefix(d, "net/http") || d == "crypto/tls" {
			t.Errorf("the package links %s", d)
		}
	}
}
