package mysqllock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/testcert"
)

// A user with a password is reached with the password named by
// password_env or password_file, through baton.Open; a wrong one is
// refused by the server, and a bad parameter before any connection.
func TestOpenURLPasswordByReference(t *testing.T) {
	s := sharedServer(t)
	db := s.admin(t)
	ctx := context.Background()
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS baton",
		"DROP USER IF EXISTS 'pwref'@'%'",
		"CREATE USER 'pwref'@'%' IDENTIFIED BY 'r1ght-pw'",
		"GRANT ALL ON baton.* TO 'pwref'@'%'",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP USER IF EXISTS 'pwref'@'%'") })
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("r1ght-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MYSQLLOCK_TEST_PW", "r1ght-pw")
	t.Setenv("MYSQLLOCK_TEST_BAD", "wr0ng-pw")
	base := "mysql://pwref@" + s.addr() + "/baton?"
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
	for _, u := range []string{base + "password_env=MYSQLLOCK_TEST_PW", base + "password_file=" + pwFile} {
		if err := lock(u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	if err := lock(base + "password_env=MYSQLLOCK_TEST_BAD"); err == nil {
		t.Error("a wrong password was accepted")
	}
	// A wrong password fails at Open, naming the server, masked.
	b, err := baton.Open(ctx, "mysql://pwref:wr0ng-pw@"+s.addr()+"/baton")
	if err == nil {
		b.Close()
	}
	if err == nil || strings.Contains(err.Error(), "wr0ng-pw") || !strings.Contains(err.Error(), s.addr()) {
		t.Errorf("inline wrong password: %v, want an error at Open naming %s", err, s.addr())
	}
	f := testcert.Write(t)
	for _, u := range []string{
		base + "password_env=MYSQLLOCK_TEST_UNSET",
		"mysql://pwref:x@" + s.addr() + "/baton?password_env=MYSQLLOCK_TEST_PW",
		base + "ca=" + f.CA + "&tls=true",
		base + "ca=/nonexistent.pem",
	} {
		if err := lock(u); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", u, err)
		}
	}
	// The server serves no TLS: a URL with a CA does not fall back to
	// plain text.
	if err := lock(base + "ca=" + f.CA + "&password_env=MYSQLLOCK_TEST_PW"); err == nil {
		t.Error("ca= connected to a server without TLS")
	}
}

// TestOpenHandleNoStatement: the Backend reached the server at Open;
// opening a Mutex or an RWMutex then sends nothing (their row is made at
// the first acquisition), and a first TryLock on a new name is granted.
func TestOpenHandleNoStatement(t *testing.T) {
	s := sharedServer(t)
	ctx := context.Background()
	prefix := "openchk" + strconv.FormatInt(time.Now().UnixNano()%1e9, 10) + "_"
	db := s.admin(t)
	if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS baton"); err != nil {
		t.Fatal(err)
	}
	b := openT(t, s.url("prefix="+prefix))
	rows := func() int {
		var n int // rows but the floor row
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM baton."+prefix+"lock WHERE name <> ''").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	m, err := b.Mutex(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rw, err := b.RWMutex(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if n := rows(); n != 0 {
		t.Fatalf("%d lock rows after opening the handles, want none", n)
	}
	if _, err := m.TryLock(ctx); err != nil {
		t.Fatalf("first TryLock of the Mutex: %v", err)
	}
	if _, err := rw.TryLock(ctx); err != nil {
		t.Fatalf("first TryLock of the RWMutex: %v", err)
	}
	if n := rows(); n != 2 {
		t.Fatalf("%d lock rows after the first acquisitions, want 2", n)
	}
}
