package redislock

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redistest"
	"github.com/batonlock/baton/internal/testcert"
)

// A redis-server that asks for a password and serves TLS (with client
// certificates) is reached with the CA, the client certificate and the
// password named by URL parameters, through baton.Open; the same URL
// without them is refused by the server.
func TestOpenURLTLSAndPassword(t *testing.T) {
	f := testcert.Write(t)
	tlsPort := redistest.FreePort(t)
	s := redistest.Start(t, "--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", f.ServerCert,
		"--tls-key-file", f.ServerKey, "--tls-ca-cert-file", f.CA, "--tls-auth-clients", "yes")
	ctx := context.Background()
	if err := s.Client().ConfigSet(ctx, "requirepass", "s3cret-pw").Err(); err != nil {
		t.Fatal(err)
	}
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("s3cret-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("REDISLOCK_TEST_PW", "s3cret-pw")
	tlsAddr := "127.0.0.1:" + strconv.Itoa(tlsPort)
	certs := "ca=" + f.CA + "&cert=" + f.ClientCert + "&key=" + f.ClientKey

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
	for _, u := range []string{
		"rediss://" + tlsAddr + "?" + certs + "&password_env=REDISLOCK_TEST_PW",
		"rediss://" + tlsAddr + "?" + certs + "&password_file=" + pwFile,
		"redis://" + s.Addr() + "?password_file=" + pwFile,
	} {
		if err := lock(u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	for _, u := range []string{
		"rediss://" + tlsAddr + "?" + certs,                                       // no password
		"rediss://" + tlsAddr + "?ca=" + f.CA + "&password_env=REDISLOCK_TEST_PW", // no client certificate
		"rediss://" + tlsAddr + "?password_env=REDISLOCK_TEST_PW",                 // the system roots do not know the CA
	} {
		if err := lock(u); err == nil {
			t.Errorf("%s: succeeded", u)
		}
	}
	// Refused before any connection.
	for _, u := range []string{
		"redis://" + s.Addr() + "?ca=" + f.CA,                      // TLS files with a plain scheme
		"redis+cluster://" + s.Addr() + "?ca=" + f.CA,              // the same for a cluster
		"redis://:inline@" + s.Addr() + "?password_file=" + pwFile, // two passwords
		"rediss://" + tlsAddr + "?ca=/nonexistent/ca.pem",
		"rediss+cluster://" + tlsAddr + "?cert=" + f.ClientCert, // cert without key
		"redis://" + s.Addr() + "?password_env=REDISLOCK_TEST_UNSET",
		"redis+sentinel://" + s.Addr() + "/mymaster?ca=" + f.CA, // Sentinel: the same rules
		"rediss+sentinel://" + s.Addr() + "/mymaster?key=" + f.ClientKey,
		"redis+sentinel://:inline@" + s.Addr() + "/mymaster?password_env=REDISLOCK_TEST_PW",
	} {
		b, err := baton.Open(ctx, u)
		if err == nil {
			b.Close()
		}
		if !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", u, err)
		}
	}
}

// The Sentinels' password, too, may be named rather than written.
func TestSentinelPasswordByReference(t *testing.T) {
	t.Setenv("REDISLOCK_TEST_SENTINEL_PW", "sent-pw")
	u, err := url.Parse("redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster?sentinel_password_env=REDISLOCK_TEST_SENTINEL_PW")
	if err != nil {
		t.Fatal(err)
	}
	fo, err := sentinelOptions(u, "redis")
	if err != nil || fo.SentinelPassword != "sent-pw" || fo.MasterName != "mymaster" {
		t.Fatalf("sentinelOptions = %+v, %v", fo, err)
	}
	for _, raw := range []string{
		"redis+sentinel://127.0.0.1:26379/m?sentinel_password=a&sentinel_password_env=REDISLOCK_TEST_SENTINEL_PW",
		"redis+sentinel://127.0.0.1:26379/m?sentinel_password_env=REDISLOCK_TEST_UNSET",
	} {
		b, err := baton.Open(context.Background(), raw)
		if err == nil {
			b.Close()
		}
		if !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", raw, err)
		}
	}
}
