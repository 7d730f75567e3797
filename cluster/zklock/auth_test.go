package zklock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/testcert"
)

// TestParseURLSecrets: user information and the shared password
// parameters give a digest identity; TLS files need zks://; secrets never
// appear in the errors.
func TestParseURLSecrets(t *testing.T) {
	t.Setenv("ZK_TEST_PW", "from-env")
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	certs := testcert.Write(t)
	for _, tc := range []struct {
		in, user, password string
		tls                bool
	}{
		{"zk://app:s%3Acret@h1,h2:2/p", "app", "s:cret", false},
		{"zk://app@h1/p?password_env=ZK_TEST_PW", "app", "from-env", false},
		{"zk://app@h1/p?password_file=" + pwFile, "app", "from-file", false},
		{"zks://h1:2281/p?ca=" + certs.CA, "", "", true},
		{"ZKS://app:pw@h1:2281/p?ca=" + certs.CA + "&cert=" + certs.ClientCert + "&key=" + certs.ClientKey, "app", "pw", true},
		{"zks://h1", "", "", true},
	} {
		tg, err := parseURL(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if tg.user != tc.user || tg.password != tc.password || tg.tls != tc.tls {
			t.Errorf("%s: user %q password %q tls %v, want %q %q %v", tc.in, tg.user, tg.password, tg.tls, tc.user, tc.password, tc.tls)
		}
		acl := tg.acl()
		if len(acl) != 1 || (tc.user == "") != (acl[0].Scheme == "world") || tc.user != "" && !strings.HasPrefix(acl[0].ID, tc.user+":") {
			t.Errorf("%s: ACL %+v", tc.in, acl)
		}
	}
	for _, tc := range []struct{ in, says string }{
		{"zk://h/p?ca=" + certs.CA, "zks://"},
		{"zk://h/p?cert=" + certs.ClientCert + "&key=" + certs.ClientKey, "zks://"},
		{"zks://h/p?cert=" + certs.ClientCert, "go together"},
		{"zks://h/p?ca=/nonexistent.pem", "nonexistent"},
		{"zk://h/p?password_env=ZK_TEST_PW", "no user name"},
		{"zk://app@h/p", "no password"},
		{"zk://app:inline-secret@h/p?password_env=ZK_TEST_PW", "password in the URL"},
		{"zk://app@h/p?password_env=ZK_TEST_UNSET", "unset or empty"},
		{"zk://app:inline-secret@h:0/p", "port"},
		{"zk://:inline-secret@h/p", "user name"},
		{"zkx://h", "scheme"},
	} {
		_, err := parseURL(tc.in)
		if !errors.Is(err, baton.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want ErrInvalidArgument saying %q", tc.in, err, tc.says)
			continue
		}
		if strings.Contains(err.Error(), "inline-secret") {
			t.Errorf("%s: the error shows the password: %v", tc.in, err)
		}
	}
	if got, want := baton.RedactURL("zk://app:inline-secret@h1:1,h2:2/p?ttl=2s"), "zk://app:xxxxx@h1:1,h2:2/p?ttl=2s"; got != want {
		t.Errorf("RedactURL: %s, want %s", got, want)
	}
	if got, want := baton.RedactURL("zks://app:inline-secret@h1/p?ca=/ca.pem"), "zks://app:xxxxx@h1/p?ca=/ca.pem"; got != want {
		t.Errorf("RedactURL: %s, want %s", got, want)
	}
	// baton.Open knows zks:// and masks the password in its errors.
	_, err := baton.Open(context.Background(), "zks://app:inline-secret@h/p?ca=/nonexistent.pem")
	if !errors.Is(err, baton.ErrInvalidArgument) || strings.Contains(err.Error(), "inline-secret") {
		t.Errorf("Open: %v", err)
	}
}

func randomPrefix(t *testing.T, what string) string {
	var r [6]byte
	_, _ = rand.Read(r[:])
	return what + "-" + hex.EncodeToString(r[:])
}

func openZK(t *testing.T, url string) baton.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := baton.Open(ctx, url)
	if err != nil {
		t.Fatalf("open %s: %v", baton.RedactURL(url), err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func isNoAuth(err error) bool {
	return errors.Is(err, zk.ErrNoAuth) || err != nil && strings.Contains(err.Error(), zk.ErrNoAuth.Error())
}

// TestDigestACL: a Backend with a digest identity creates nodes that only
// that identity may use. A holder's node cannot be deleted, nor the queue
// read, by an unauthenticated client or another identity, and the hold
// stays trusted; another identity (or a wrong password) cannot lock the
// name; a second session of the same identity contends as usual.
func TestDigestACL(t *testing.T) {
	addr := standalone(t)
	prefix := randomPrefix(t, "digest")
	url := func(userinfo string) string { return "zk://" + userinfo + "@" + addr + "/" + prefix + "?ttl=2s" }
	t.Setenv("ZK_ALICE_PW", "alice-pw")
	alice := openZK(t, url("alice:alice-pw"))
	ctx := context.Background()
	m, err := alice.Mutex(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	hd, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The holder's node, as its owner sees it.
	owner := connect(t, []string{addr}, 2*time.Second)
	if err := owner.AddAuth("digest", []byte("alice:alice-pw")); err != nil {
		t.Fatal(err)
	}
	q := "/" + prefix + "/mutex/x/q"
	kids, _, err := owner.Children(q)
	if err != nil || len(kids) != 1 {
		t.Fatalf("the holder's queue %s: %v %v", q, kids, err)
	}
	node := q + "/" + kids[0]
	acl, _, err := owner.GetACL(node)
	if err != nil || len(acl) != 1 || acl[0].Scheme != "digest" || !strings.HasPrefix(acl[0].ID, "alice:") || acl[0].Perms != zk.PermAll {
		t.Fatalf("ACL of %s: %+v %v", node, acl, err)
	}

	anon := connect(t, []string{addr}, 2*time.Second)
	mallory := connect(t, []string{addr}, 2*time.Second)
	if err := mallory.AddAuth("digest", []byte("mallory:mallory-pw")); err != nil {
		t.Fatal(err)
	}
	for who, c := range map[string]*zk.Conn{"unauthenticated": anon, "mallory": mallory} {
		if err := c.Delete(node, -1); !isNoAuth(err) {
			t.Errorf("%s deletes the holder's node: %v, want %v", who, err, zk.ErrNoAuth)
		}
		if _, _, err := c.Children(q); !isNoAuth(err) {
			t.Errorf("%s lists the queue: %v, want %v", who, err, zk.ErrNoAuth)
		}
	}
	time.Sleep(300 * time.Millisecond) // a node deletion would be seen by then
	if err := hd.Err(); err != nil {
		t.Fatalf("the hold after the refused deletions: %v", err)
	}

	// Another identity, or a wrong password, is refused at Open, naming
	// the server, with the password masked.
	for _, ui := range []string{"mallory:mallory-pw", "alice:wrong"} {
		b, err := baton.Open(ctx, url(ui))
		if err == nil {
			b.Close()
		}
		if !isNoAuth(err) || !strings.Contains(err.Error(), addr) || strings.Contains(err.Error(), strings.Split(ui, ":")[1]) {
			t.Errorf("%s opens alice's prefix: %v, want %v naming %s", strings.Split(ui, ":")[0], err, zk.ErrNoAuth, addr)
		}
	}

	// Same identity, password by parameter, another session: it waits for
	// the holder as any client does.
	alice2 := openZK(t, "zk://alice@"+addr+"/"+prefix+"?ttl=2s&password_env=ZK_ALICE_PW")
	m2, err := alice2.Mutex(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m2.TryLock(ctx); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("TryLock by the same identity while held: %v, want ErrLocked", err)
	}
	got := make(chan error, 1)
	go func() {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := m2.Lock(lctx)
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Lock by the same identity after the release: %v", err)
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// tlsServer starts a standalone server whose secure client port serves
// TLS with the PEM files of certs (the Netty connection factory, PEM key
// and trust stores, client certificates required), and returns the
// addresses of its plain and secure ports.
func tlsServer(t *testing.T, certs testcert.Files) (plain, secure string) {
	t.Helper()
	needServer(t)
	dir, err := os.MkdirTemp(tempBase(), "zklock-tls-")
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(certs.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := os.ReadFile(certs.ServerCert)
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "server-bundle.pem")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bundle, append(key, cert...), 0o600); err != nil {
		t.Fatal(err)
	}
	securePort := freePort(t)
	s := &zkServer{dir: dir, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	s.extra = []string{
		fmt.Sprintf("secureClientPort=%d", securePort),
		"secureClientPortAddress=127.0.0.1",
		"serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
		"ssl.keyStore.location=" + bundle,
		"ssl.keyStore.type=PEM",
		"ssl.trustStore.location=" + certs.CA,
		"ssl.trustStore.type=PEM",
		"ssl.clientAuth=need",
		"authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider",
	}
	s.jvm = []string{"-Dzookeeper.serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory"}
	s.start(t, nil)
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			if log, err := os.ReadFile(filepath.Join(dir, "server.log")); err == nil {
				t.Logf("server log:\n%s", tail(string(log), 4000))
			}
		}
		os.RemoveAll(dir)
	})
	secure = fmt.Sprintf("127.0.0.1:%d", securePort)
	for start := time.Now(); time.Since(start) < 30*time.Second; time.Sleep(20 * time.Millisecond) {
		if out, _ := fourLetter(s.addr, "ruok"); out == "imok" && s.mode() == "standalone" {
			return s.addr, secure
		}
	}
	t.Fatalf("zookeeper on %s not ready after 30 s", s.addr)
	return "", ""
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestTLS: zks:// with the CA and a client certificate locks and contends
// through the server's secure client port; a client that does not trust
// the server, one without a client certificate, and a plain zk:// client
// on the secure port get no session.
func TestTLS(t *testing.T) {
	certs := testcert.Write(t)
	plain, secure := tlsServer(t, certs)
	prefix := randomPrefix(t, "tls")
	good := "zks://" + secure + "/" + prefix + "?ttl=2s&ca=" + certs.CA + "&cert=" + certs.ClientCert + "&key=" + certs.ClientKey
	b1, b2 := openZK(t, good), openZK(t, good)
	ctx := context.Background()
	m1, err := b1.Mutex(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	m2, err := b2.Mutex(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m2.TryLock(ctx); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("TryLock while held over TLS: %v, want ErrLocked", err)
	}
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m2.TryLock(ctx); err != nil {
		t.Fatalf("TryLock after the release: %v", err)
	}
	// The nodes are on the same server as the plain port sees it (while
	// held: a free name keeps no node).
	c := connect(t, []string{plain}, 2*time.Second)
	if ok, _, err := c.Exists("/" + prefix + "/mutex/x/q"); err != nil || !ok {
		t.Errorf("the queue on the plain port: %v %v", ok, err)
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	other := testcert.Write(t) // another authority
	for what, u := range map[string]string{
		"an untrusted server":     "zks://" + secure + "/" + prefix + "?ca=" + other.CA + "&cert=" + certs.ClientCert + "&key=" + certs.ClientKey,
		"no client certificate":   "zks://" + secure + "/" + prefix + "?ca=" + certs.CA,
		"plain zk:// on TLS port": "zk://" + secure + "/" + prefix,
	} {
		octx, cancel := context.WithTimeout(ctx, 3*time.Second)
		b, err := baton.Open(octx, u)
		cancel()
		if err == nil {
			_ = b.Close()
			t.Errorf("%s: got a session", what)
		}
	}
}
