package local_test

import (
	"os/exec"
	"strings"
	"testing"
)

// A program that uses only same-host primitives, values included, links no
// network client (nor package net).
func TestNoNetworkDependency(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/batonlock/baton/local").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "github.com/batonlock/baton/local/shmvalue\n") {
		t.Errorf("shmvalue is not among the dependencies:\n%s", out)
	}
	for _, d := range strings.Split(string(out), "\n") {
		if d == "net" || strings.Contains(d, "redis") || strings.HasPrefix(d, "go.etcd.io/") || strings.HasPrefix(d, "google.golang.org/grpc") {
			t.Errorf("local links %s", d)
		}
	}
}
