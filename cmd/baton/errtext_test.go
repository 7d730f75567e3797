package main

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// TestErrorTexts: baton's messages say what failed once, in the shape
// "baton: <what> "<name>": <what failed>: <cause>", without the layers or
// the internals of the backends, and a semaphore clash names the existing
// number of slots.
func TestErrorTexts(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	// The semaphore exists while a command holds a slot of it (an idle
	// one is reclaimed, and its capacity with it).
	holder := command(ns, "sem", "-j", "2", "gpu", "--", "sleep", "60")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	stopCmd(t, holder)
	for deadline := time.Now().Add(20 * time.Second); run(t, ns, "status", "gpu").code != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("sem -j 2 gpu never held a slot")
		}
	}
	redisURL, _ := startRedis(t)
	addr := strings.TrimPrefix(redisURL, "redis://")
	setPassword(t, addr, "sekret")
	down := closedRedis(t)
	cases := []struct {
		backend string
		args    []string
		code    int
		want    string   // a line of stderr starts with it
		never   []string // in no line
	}{
		{ns, []string{"sem", "-j", "3", "gpu", "true"}, exitUsage,
			`baton: semaphore "gpu": open with -j 3: it exists with 2 slots`, nil},
		{"zk://", []string{"run", "x", "true"}, exitUsage,
			`baton: backend URL "zk://": URL host "": no host`, []string{"invalid argument", "zklock"}},
		// Open reaches the server and checks the credentials, so these
		// fail there, once, naming the backend.
		{down, []string{"ls"}, exitBackend,
			`baton: backend ` + down + `: no answer from the server: dial tcp ` + strings.TrimPrefix(down, "redis://"),
			[]string{"redislock", "list: list"}},
		{"redis://:wrong@" + addr, []string{"run", "x", "true"}, exitBackend,
			`baton: backend redis://:xxxxx@` + addr + `: the server refused the credentials: WRONGPASS`,
			[]string{"subscribe", "wake-up", "redislock", "sekret", addr + ": " + addr}},
		{"redis://:wrong@" + addr, []string{"status", "x"}, exitBackend,
			`baton: backend redis://:xxxxx@` + addr + `: the server refused the credentials: WRONGPASS`,
			[]string{"redislock", "inspect: inspect"}},
	}
	for _, c := range cases {
		r := run(t, c.backend, c.args...)
		if r.code != c.code || !hasLinePrefix(r.stderr, c.want) {
			t.Errorf("%s %v: exit %d, stderr %q; want %d and a line %q...", c.backend, c.args, r.code, r.stderr, c.code, c.want)
		}
		for _, n := range c.never {
			if strings.Contains(r.stderr, n) {
				t.Errorf("%s %v: stderr %q says %q", c.backend, c.args, r.stderr, n)
			}
		}
		if strings.Count(r.stderr, "WRONGPASS") > 1 {
			t.Errorf("%s %v: the cause twice: %q", c.backend, c.args, r.stderr)
		}
	}
}

func hasLinePrefix(s, prefix string) bool {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// setPassword makes the Redis at addr ask for password.
func setPassword(t *testing.T, addr, password string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONFIG SET requirepass %s\r\n", password)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
		t.Fatalf("CONFIG SET requirepass: %q, %v", line, err)
	}
}

// closedRedis returns a redis:// URL of a loopback port nothing listens on.
func closedRedis(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "redis://" + addr
}
