package etcdlock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonlock/baton"
)

// On a cluster with authentication on, a user's password named by
// password_env or password_file lets baton.Open in; a wrong one, or none,
// does not; a bad parameter is refused before any connection.
func TestOpenURLPasswordByReference(t *testing.T) {
	c := startCluster(t, 1)
	cl := c.client(t)
	ctx := context.Background()
	if _, err := cl.RoleAdd(ctx, "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.UserAdd(ctx, "root", "r1ght-pw"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("r1ght-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ETCDLOCK_TEST_PW", "r1ght-pw")
	t.Setenv("ETCDLOCK_TEST_BAD", "wr0ng-pw")
	// Every authentication hashes the password on the server: a loaded
	// machine under the race detector can take longer than the default
	// dial timeout to connect.
	base := strings.Replace(c.url("secret"), "etcd://", "etcd://root@", 1)
	const slow = "&dial_timeout=60s"
	lock := func(u string) error {
		b, err := baton.Open(ctx, u)
		if err != nil {
			return err
		}
		defer b.Close()
		m, err := b.Mutex(ctx, "secret-url")
		if err != nil {
			return err
		}
		if _, err := m.Lock(ctx); err != nil {
			return err
		}
		return m.Unlock(ctx)
	}
	for _, u := range []string{base + "?password_env=ETCDLOCK_TEST_PW" + slow, base + "?password_file=" + pwFile + slow} {
		if err := lock(u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	for _, u := range []string{base + "?password_env=ETCDLOCK_TEST_BAD", c.url("secret")} {
		if err := lock(u); err == nil {
			t.Errorf("%s: succeeded", u)
		}
	}
	err := lock(strings.Replace(base, "root@", "root:wr0ng-pw@", 1))
	if err == nil || strings.Contains(err.Error(), "wr0ng-pw") {
		t.Errorf("inline wrong password: %v", err)
	}
	for _, u := range []string{
		base + "?password_env=ETCDLOCK_TEST_UNSET",
		c.url("secret") + "?password_env=ETCDLOCK_TEST_PW", // no user
		strings.Replace(base, "root@", "root:x@", 1) + "?password_env=ETCDLOCK_TEST_PW",
		base + "?ca=" + pwFile, // TLS files with etcd://
	} {
		if err := lock(u); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", u, err)
		}
	}
}
