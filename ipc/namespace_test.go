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

// Entry validates and encodes once; Resolve encodes the same way without
// checking, and keeps every name, valid or not, inside DIR/KIND.
func TestEntryResolve(t *testing.T) {
	ns, err := OpenNamespace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "a/b", ".hidden", "50%", "é", strings.Repeat("x", 200), strings.Repeat("é", 40)} {
		e, err := ns.Entry("k", name)
		if err != nil {
			t.Fatalf("Entry(%q): %v", name, err)
		}
		enc, _ := EncodeName(name)
		if want := filepath.Join(ns.Dir(), "k", enc); e.Path() != want || e.Name() != name || e.Kind() != "k" || e.Namespace() != ns {
			t.Errorf("Entry(%q) = %+v, want path %s", name, e, want)
		}
		if r := ns.Resolve("k", name); r != e {
			t.Errorf("Resolve(%q) = %+v, Entry gave %+v", name, r, e)
		}
	}
	for _, bad := range []string{"", "/a", "a/../b", "x\x00", strings.Repeat("é", 41), strings.Repeat("/x", 90)} {
		if _, err := ns.Entry("k", bad); !errors.Is(err, baton.ErrInvalidName) {
			t.Errorf("Entry(%q): %v", bad, err)
		}
		_, encErr := EncodeName(bad)
		if lenErr := CheckEncodedLen(bad); lenErr != nil && encErr == nil {
			t.Errorf("CheckEncodedLen(%q) refused what EncodeName accepts: %v", bad, lenErr)
		}
		p := ns.Resolve("k", bad).Path()
		if p != "" && filepath.Dir(p) != filepath.Join(ns.Dir(), "k") {
			t.Errorf("Resolve(%q) left DIR/KIND: %s", bad, p)
		}
	}
	if err := ns.Resolve("k", "").valid("k"); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("the empty name resolved to a usable entry: %v", err)
	}
	if err := (Entry{}).valid("k"); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("zero Entry: %v", err)
	}
	if err := ns.Resolve("j", "a").valid("k"); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("entry of another kind: %v", err)
	}
	var nilNS *Namespace
	if _, err := nilNS.Entry("k", "a"); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("nil namespace: %v", err)
	}
	// The length rule alone, as the local backend's ValidateName applies it.
	if err := CheckEncodedLen(strings.Repeat("é", 40)); err != nil {
		t.Errorf("240 encoded bytes refused: %v", err)
	}
	if err := CheckEncodedLen(strings.Repeat("é", 40) + "a"); !errors.Is(err, baton.ErrInvalidName) {
		t.Errorf("241 encoded bytes accepted: %v", err)
	}
}
