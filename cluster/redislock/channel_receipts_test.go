package redislock

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/batonlock/baton"
)

// dropProxy forwards TCP connections to a server and, when armed, drops
// the connection that carries the next reply (containing mark, if set)
// instead of passing it on: the server ran the request, the client never
// hears of it.
type dropProxy struct {
	l    net.Listener
	mu   sync.Mutex
	arm  bool   // guarded by mu
	mark []byte // guarded by mu
	hits int    // guarded by mu: replies dropped
}

func startDropProxy(t *testing.T, target string) *dropProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{l: l}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(u, c); u.Close() }()
			go func() { defer wg.Done(); p.replies(c, u); c.Close(); u.Close() }()
		}
	}()
	t.Cleanup(func() { l.Close(); wg.Wait() })
	return p
}

func (p *dropProxy) replies(c, u net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := u.Read(buf)
		if n > 0 {
			p.mu.Lock()
			drop := p.arm && (p.mark == nil || bytes.Contains(buf[:n], p.mark))
			if drop {
				p.arm = false
				p.hits++
			}
			p.mu.Unlock()
			if drop {
				return
			}
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *dropProxy) dropNext(mark string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.arm, p.hits = true, 0
	p.mark = nil
	if mark != "" {
		p.mark = []byte(mark)
	}
}

func (p *dropProxy) dropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits
}

// TestChannelLostReplies: a receive or send whose reply is lost on the
// way (the connection breaks after the server ran it) neither loses the
// messages it took nor sends its messages twice, whether the client sends
// the request again itself or the call fails and the handle goes on (or
// closes).
func TestChannelLostReplies(t *testing.T) {
	s := startRedis(t)
	p := startDropProxy(t, s.Addr())
	ctx := context.Background()
	direct := open(t, s.URL(testQuery))
	for _, retries := range []string{"", "&max_retries=-1"} {
		name := "lost" + retries
		via := open(t, "redis://"+p.l.Addr().String()+"?"+testQuery+retries)
		src := openChan(t, direct, name, baton.ChannelOptions{Capacity: 16, MaxMessage: 16})
		for _, m := range []string{"first", "second", "third"} {
			if err := src.Send(ctx, []byte(m)); err != nil {
				t.Fatal(err)
			}
		}
		dst := openChan(t, via, name, baton.ChannelOptions{})
		recv := func() string {
			t.Helper()
			for range 3 {
				if msg, err := dst.TryRecv(ctx); err == nil {
					return string(msg)
				}
			}
			t.Fatalf("%s: no receive succeeded", name)
			return ""
		}
		p.dropNext("first")
		if got := recv(); got != "first" {
			t.Errorf("%s: after a lost reply, received %q, want first", name, got)
		}
		if p.dropped() != 1 {
			t.Fatalf("%s: %d replies dropped, want 1", name, p.dropped())
		}

		// A lost reply of a send: the message is in the channel once.
		p.dropNext("")
		err := dst.TrySend(ctx, []byte("fourth"))
		if retries == "" && err != nil {
			t.Errorf("%s: a send sent again after its reply was lost failed: %v", name, err)
		}
		if retries != "" && err == nil {
			t.Errorf("%s: a send whose reply was dropped succeeded", name)
		}
		for _, w := range []string{"second", "third", "fourth"} {
			if got := recv(); got != w {
				t.Errorf("%s: received %q, want %q", name, got, w)
			}
		}
		if msg, err := src.TryRecv(ctx); err == nil {
			t.Errorf("%s: a message %q left after the last one sent: a send went twice", name, msg)
		}
		drain(src)

		// A receive that failed and is not tried again: Close gives its
		// batch back.
		if retries != "" {
			if err := src.Send(ctx, []byte("fifth")); err != nil {
				t.Fatal(err)
			}
			lone := openChan(t, via, name, baton.ChannelOptions{})
			p.dropNext("fifth")
			if _, err := lone.TryRecv(ctx); err == nil {
				t.Fatalf("%s: a receive whose reply was dropped succeeded", name)
			}
			lone.Close()
			if got, err := src.TryRecv(ctx); err != nil || string(got) != "fifth" {
				t.Errorf("%s: after Close of a handle whose receive failed: %q, %v; want fifth", name, got, err)
			}
		}
	}
}

func drain(c baton.Channel) {
	for {
		if _, err := c.TryRecv(context.Background()); err != nil {
			return
		}
	}
}
