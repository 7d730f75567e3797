package ipc

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonlock/baton"
)

func TestEncodeName(t *testing.T) {
	for name, want := range map[string]string{
		"a":        "a",
		"a/b":      "a%2Fb",
		".hidden":  "%2Ehidden",
		"a.b":      "a.b",
		"50%":      "50%25",
		"é":        "%C3%A9",
		"x y{z}":   "x%20y%7Bz%7D",
		"job_1-ok": "job_1-ok",
	} {
		got, err := EncodeName(name)
		if err != nil || got != want {
			t.Errorf("EncodeName(%q) = %q, %v; want %q", name, got, err, want)
		}
		back, err := DecodeName(got)
		if err != nil || back != name {
			t.Errorf("DecodeName(%q) = %q, %v", got, back, err)
		}
	}
	if _, err := EncodeName(strings.Repeat("/x", 90)); !errors.Is(err, baton.ErrInvalidName) {
		t.Errorf("a name too long once encoded: %v", err)
	}
	for _, enc := range []string{"%zz", "%4", "a%2fb", "%61", "x%00"} {
		if _, err := DecodeName(enc); err == nil {
			t.Errorf("DecodeName(%q) accepted a non-canonical encoding", enc)
		}
	}
}

func TestNamespacePath(t *testing.T) {
	ns, err := OpenNamespace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, err := ns.Path("flock", "../../etc/passwd")
	if !errors.Is(err, baton.ErrInvalidName) {
		t.Fatalf("traversal accepted: %q", p)
	}
	p, err = ns.Path("flock", "a/b")
	if err != nil || filepath.Dir(p) != filepath.Join(ns.Dir(), "flock") {
		t.Fatalf("Path = %q, %v", p, err)
	}
}

func FuzzEncodeName(f *testing.F) {
	for _, s := range []string{"a", "a/b", "%", ".x", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc, err := EncodeName(s)
		if err != nil {
			return
		}
		if strings.ContainsAny(enc, "/\x00") || strings.HasPrefix(enc, ".") || len(enc) > maxEncodedName {
			t.Fatalf("EncodeName(%q) = %q is not a safe file name", s, enc)
		}
		back, err := DecodeName(enc)
		if err != nil || back != s {
			t.Fatalf("round trip %q -> %q -> %q, %v", s, enc, back, err)
		}
	})
}
