package urlparam

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/batonlock/baton/internal/errs"
	"github.com/batonlock/baton/internal/testcert"
)

func TestTake(t *testing.T) {
	f := testcert.Write(t)
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("URLPARAM_TEST_PW", "fr0m-env")
	q := url.Values{CA: {f.CA}, Cert: {f.ClientCert}, Key: {f.ClientKey}, PasswordFile: {pw}, "db": {"3"}}
	c, err := Take(q)
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 1 || q.Get("db") != "3" {
		t.Errorf("left %v, want only db", q)
	}
	if !c.HasTLS() || !c.HasPassword || c.Password != "s3cret" {
		t.Errorf("Take = %+v", c)
	}
	tc := c.TLSConfig(nil, "h")
	if tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "h" {
		t.Errorf("TLSConfig = %+v", tc)
	}
	if p, err := c.PasswordOr("", false); err != nil || p != "s3cret" {
		t.Errorf("PasswordOr = %q, %v", p, err)
	}
	if _, err := c.PasswordOr("inline", true); !errors.Is(err, errs.InvalidArgument) {
		t.Errorf("PasswordOr with an inline password too = %v", err)
	}

	c, err = Take(url.Values{PasswordEnv: {"URLPARAM_TEST_PW"}})
	if err != nil || c.Password != "fr0m-env" || c.HasTLS() {
		t.Errorf("Take(password_env) = %+v, %v", c, err)
	}
	if c, err := Take(url.Values{}); err != nil || c.HasTLS() || c.HasPassword {
		t.Errorf("Take of nothing = %+v, %v", c, err)
	}
}

func TestTakeRefuses(t *testing.T) {
	f := testcert.Write(t)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "x")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Unsetenv("URLPARAM_TEST_UNSET")
	t.Setenv("URLPARAM_TEST_EMPTY", "")
	for name, q := range map[string]url.Values{
		"missing ca":     {CA: {filepath.Join(dir, "none")}},
		"ca not PEM":     {CA: {notPEM}},
		"cert alone":     {Cert: {f.ClientCert}},
		"key alone":      {Key: {f.ClientKey}},
		"key mismatch":   {Cert: {f.ClientCert}, Key: {f.ServerKey}},
		"ca twice":       {CA: {f.CA, f.CA}},
		"empty ca":       {CA: {""}},
		"both passwords": {PasswordFile: {notPEM}, PasswordEnv: {"HOME"}},
		"missing file":   {PasswordFile: {filepath.Join(dir, "none")}},
		"unset env":      {PasswordEnv: {"URLPARAM_TEST_UNSET"}},
		"empty env":      {PasswordEnv: {"URLPARAM_TEST_EMPTY"}},
	} {
		if _, err := Take(q); !errors.Is(err, errs.InvalidArgument) {
			t.Errorf("%s: Take = %v, want ErrInvalidArgument", name, err)
		}
	}
}

func TestSecret(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("fr0m-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("URLPARAM_TEST_SP", "fr0m-env")
	for _, tc := range []struct {
		q    url.Values
		want string
		ok   bool
	}{
		{url.Values{"sp": {"inline"}, "x": {"1"}}, "inline", true},
		{url.Values{"sp_file": {pw}, "x": {"1"}}, "fr0m-file", true},
		{url.Values{"sp_env": {"URLPARAM_TEST_SP"}, "x": {"1"}}, "fr0m-env", true},
		{url.Values{"x": {"1"}}, "", false},
	} {
		v, ok, err := Secret(tc.q, "sp")
		if err != nil || v != tc.want || ok != tc.ok || len(tc.q) != 1 {
			t.Errorf("Secret(%v) = %q, %v, %v; left %v", tc.q, v, ok, err, tc.q)
		}
	}
	for _, q := range []url.Values{
		{"sp": {"a"}, "sp_env": {"URLPARAM_TEST_SP"}},
		{"sp_file": {pw}, "sp_env": {"URLPARAM_TEST_SP"}},
		{"sp": {"a", "b"}},
		{"sp_env": {"URLPARAM_TEST_UNSET"}},
		{"sp_file": {filepath.Join(t.TempDir(), "none")}},
	} {
		if _, _, err := Secret(q, "sp"); !errors.Is(err, errs.InvalidArgument) {
			t.Errorf("Secret(%v) = %v, want ErrInvalidArgument", q, err)
		}
	}
}

// TestQuery: a query that does not parse is refused, not cut short.
func TestQuery(t *testing.T) {
	for _, raw := range []string{"prefix=x%zz", "ttl=1s&prefix=%", "a=1;b=2", "%zz=1"} {
		if q, err := Query(raw); !errors.Is(err, errs.InvalidArgument) {
			t.Errorf("Query(%q) = %v, %v; want ErrInvalidArgument", raw, q, err)
		}
	}
	q, err := Query("prefix=a%2Fb&ttl=1s")
	if err != nil || q.Get("prefix") != "a/b" || q.Get("ttl") != "1s" {
		t.Errorf("Query = %v, %v", q, err)
	}
}

// TestHostPort: a host and port are checked as written, before any dial.
func TestHostPort(t *testing.T) {
	for _, tc := range []struct{ in, host, port string }{
		{"h", "h", "9"},
		{"h:1", "h", "1"},
		{"127.0.0.1:65535", "127.0.0.1", "65535"},
		{"[::1]", "::1", "9"},
		{"[::1]:80", "::1", "80"},
		{"[fe80::1%eth0]:80", "fe80::1%eth0", "80"},
	} {
		h, p, err := HostPort(tc.in, "9")
		if err != nil || h != tc.host || p != tc.port {
			t.Errorf("HostPort(%q) = %q, %q, %v; want %q, %q", tc.in, h, p, err, tc.host, tc.port)
		}
	}
	for _, in := range []string{"", ":80", "h:", "h:0", "h:99999", "h:65536", "h:-1", "h:x", "h:080",
		"::1", "[::1", "[zz::1]:80", "a b:1", "h,i:1", "u@h:1", "[h]:1"} {
		if _, _, err := HostPort(in, "9"); !errors.Is(err, errs.InvalidArgument) {
			t.Errorf("HostPort(%q) = %v, want ErrInvalidArgument", in, err)
		}
	}
}
