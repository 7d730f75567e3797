package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"1.5", 1500 * time.Millisecond, true},
		{"0.3", 300 * time.Millisecond, true},
		{"10", 10 * time.Second, true},
		{"500ms", 500 * time.Millisecond, true},
		{"2m30s", 150 * time.Second, true},
		{"-1", 0, false},
		{"-5ms", 0, false},
		{"", 0, false},
		{"soon", 0, false},
		{"1e400", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"1fortnight", 0, false},
	} {
		got, err := parseDuration(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestBackendURLForms(t *testing.T) {
	for _, tc := range []struct {
		in  string
		dir string // for local forms
		ok  bool
	}{
		{"local:", "", true},
		{"LOCAL:", "", true},
		{"local:///tmp/ns", "/tmp/ns", true},
		{"local:/tmp/ns", "/tmp/ns", true},
		{"file:///tmp/ns/", "/tmp/ns", true},
		{"file://localhost/tmp/ns", "/tmp/ns", true},
		{"file:", "", false},
		{"local:relative", "", false},
		{"local://otherhost/tmp", "", false},
		{"local:///tmp?x=1", "", false},
		{"redis://127.0.0.1:6379", "", true},
		{"rediss://h:6380/2", "", true},
		{"redis+cluster://h1:1,h2:2", "", true},
		{"redlock://h1:1,h2:2,h3:3", "", true},
		{"etcd://h1:2379,h2:2379", "", true},
		{"etcds://h1:2379", "", true},
		{"postgres://u@h:5432/db", "", true},
		{"postgresql://h/db", "", true},
		{"zookeeper://h", "", false},
		{"/tmp/ns", "", false},
		{"", "", false},
		{":", "", false},
	} {
		err := checkBackendURL(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("checkBackendURL(%q) = %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if err != nil {
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != exitUsage || !strings.Contains(err.Error(), "accepted") {
				t.Errorf("checkBackendURL(%q): error %v is not a usage error naming the accepted forms", tc.in, err)
			}
			continue
		}
		if strings.HasPrefix(strings.ToLower(tc.in), "local") || strings.HasPrefix(tc.in, "file") {
			if dir, _ := local.ParseURL(tc.in); dir != tc.dir {
				t.Errorf("local.ParseURL(%q) = %q, want %q", tc.in, dir, tc.dir)
			}
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"redis://user:secret@h:6379/0": "redis://user:xxxxx@h:6379/0",
		"redis://h:6379":               "redis://h:6379",
		"etcd://root@h:2379":           "etcd://root@h:2379",
		"local:":                       "local:",
	} {
		if got := baton.RedactURL(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"1.5", "500ms", "0", "-1", "1e9", "2m30s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDuration(s)
		if err == nil && d < 0 {
			t.Fatalf("parseDuration(%q) = %v, negative", s, d)
		}
	})
}

func FuzzBackendURL(f *testing.F) {
	for _, s := range []string{"local:", "local:///tmp/x", "file:///a/../b", "redis://h:1", "etcd://a,b", "x", "local:a%00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := checkBackendURL(s)
		if err != nil {
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != exitUsage {
				t.Fatalf("checkBackendURL(%q): %v is not a usage error", s, err)
			}
			return
		}
		scheme, _, _ := strings.Cut(strings.ToLower(s), ":")
		if scheme == "local" || scheme == "file" {
			dir, err := local.ParseURL(s)
			if err != nil || (dir != "" && (!filepath.IsAbs(dir) || filepath.Clean(dir) != dir)) {
				t.Fatalf("local.ParseURL(%q) = %q, %v", s, dir, err)
			}
		}
	})
}

// TestUnknownSchemeNamesRegistered: a bad scheme's message lists the
// schemes the linked backends registered, from the registry itself.
func TestUnknownSchemeNamesRegistered(t *testing.T) {
	err := checkBackendURL("foo://x")
	if err == nil {
		t.Fatal("foo://x accepted")
	}
	for _, s := range baton.Schemes() {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the message does not name the registered scheme %q: %v", s, err)
		}
	}
}
