package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// requirePass makes the redis-server of url ask for pass.
func requirePass(t *testing.T, url, pass string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "redis://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONFIG SET requirepass %s\r\n", pass)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, _ := bufio.NewReader(c).ReadString('\n'); !strings.HasPrefix(line, "+OK") {
		t.Fatalf("CONFIG SET requirepass: %q", line)
	}
}

// A password written in the backend URL shows nowhere: not in the
// command's BATON_BACKEND (which still reaches the backend, the password
// moving to a variable of its own), not in status or ls, not in errors.
func TestPasswordMasked(t *testing.T) {
	t.Parallel()
	const pass = "p4ss-w0rd-xyz"
	plain, _ := startRedis(t)
	requirePass(t, plain, pass)
	u := strings.Replace(plain, "redis://", "redis://:"+pass+"@", 1)
	out := filepath.Join(t.TempDir(), "out")
	script := `echo "$BATON_BACKEND" > ` + out + `; "$BATON_BIN" run -n inner -- true; echo "inner=$?" >> ` + out
	r := runEnv(t, []string{"BATON_BIN=" + batonBin}, u, "run", "outer", "-c", script)
	if r.code != 0 {
		t.Fatalf("run: exit %d, stderr %q", r.code, r.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if strings.Contains(got, pass) || !strings.Contains(got, "password_env="+childPasswordEnv) {
		t.Errorf("BATON_BACKEND of the command: %q", got)
	}
	if !strings.Contains(got, "inner=0") {
		t.Errorf("the command could not use its BATON_BACKEND: %q", got)
	}
	for _, args := range [][]string{{"ls"}, {"ls", "--json"}, {"status", "nothing-here"}, {"status", "--json", "nothing-here"}} {
		r := run(t, u, args...)
		if strings.Contains(r.stdout+r.stderr, pass) {
			t.Errorf("%v shows the password: %q %q", args, r.stdout, r.stderr)
		}
	}
	// Unreachable, and refused by the server: the errors do not quote it.
	for _, bad := range []string{
		"redis://:" + pass + "@127.0.0.1:1",
		strings.Replace(plain, "redis://", "redis://:"+pass+"-wrong@", 1),
	} {
		r := run(t, bad, "run", "-w", "5", "x", "true")
		if r.code == 0 || strings.Contains(r.stderr, pass) {
			t.Errorf("%s: exit %d, stderr %q", bad, r.code, r.stderr)
		}
	}
}

func TestChildBackend(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		env      []string
	}{
		{"redis://h:6379", "redis://h:6379", nil},
		{"redis://u:p%40ss@h:6379/0", "redis://u@h:6379/0?password_env=BATON_BACKEND_PASSWORD", []string{"BATON_BACKEND_PASSWORD=p@ss"}},
		{"redis+sentinel://h1,h2/m?sentinel_password=s3&ttl=5s",
			"redis+sentinel://h1,h2/m?sentinel_password_env=BATON_BACKEND_SENTINEL_PASSWORD&ttl=5s",
			[]string{"BATON_BACKEND_SENTINEL_PASSWORD=s3"}},
		{"postgres://u@h/db?password=pw", "postgres://u@h/db?password_env=BATON_BACKEND_PASSWORD", []string{"BATON_BACKEND_PASSWORD=pw"}},
		{"etcd://root@h?password_env=MINE", "etcd://root@h?password_env=MINE", nil},
	} {
		u, env := childBackend(tc.in)
		if u != tc.want || strings.Join(env, " ") != strings.Join(tc.env, " ") {
			t.Errorf("childBackend(%q) = %q, %q; want %q, %q", tc.in, u, env, tc.want, tc.env)
		}
	}
}
