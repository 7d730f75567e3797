package main

import (
	"net"
	"strings"
	"sync"
	"testing"
)

// silentServer accepts connections and never answers; it returns its
// address.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestUnansweringBackend: a Redis address that accepts connections but
// never answers is a backend failure (exit 70, naming the address), not a
// busy lock: neither when -w ends the wait nor with -n.
func TestUnansweringBackend(t *testing.T) {
	t.Parallel()
	addr := silentServer(t)
	u := "redis://" + addr
	for _, args := range [][]string{
		{"run", "-w", "2", "x", "true"},
		{"sem", "-j", "2", "-w", "2", "gpu", "true"},
		{"lock", "-w", "2", "x"},
		{"run", "-n", "x", "true"},
	} {
		r := run(t, u, args...)
		if r.code != exitBackend || !strings.Contains(r.stderr, addr) || strings.Contains(r.stderr, "busy") {
			t.Errorf("%v against a server that does not answer: exit %d, stderr %q; want 70 naming %s", args, r.code, r.stderr, addr)
		}
	}
	// Redlock, whose -x takes the Mutex: three nodes that do not answer.
	rl := "redlock://" + silentServer(t) + "," + silentServer(t) + "," + silentServer(t)
	r := run(t, rl, "run", "-w", "2", "x", "true")
	if r.code != exitBackend || strings.Contains(r.stderr, "busy") {
		t.Errorf("redlock run -w 2 against nodes that do not answer: exit %d, stderr %q; want 70", r.code, r.stderr)
	}
}
