package redisfence_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redistest"
	"github.com/batonlock/baton/cluster/redisfence"
	"github.com/batonlock/baton/cluster/redislock"
	"github.com/batonlock/baton/fence"
)

// The paused holder, for each guard: the test binary re-executed with
// envHolder = "guard|file|redis,<lock URL>,<redis addr>,<dir>" takes the
// Mutex pausedName on a Redis lock with a short lease, writes "first" with
// its token, says "held", and waits for a line on stdin. The test stops it
// there (SIGSTOP) past its lease, takes the lock from another client and
// writes "second", resumes it and says "go". The holder reports Hold.Err
// ("err ...") and then writes "stale" all the same ("wrote ..."), which the
// guard must refuse.
//
// For the in-process guard the resource is the test process: the holder
// sends "write <token> <value>" and reads the guard's answer.
const (
	envHolder  = "BATON_REDISFENCE_HOLDER"
	pausedName = "fenced"
	pausedTTL  = time.Second
)

func TestMain(m *testing.M) {
	if a := os.Getenv(envHolder); a != "" {
		if err := holder(a); err != nil {
			fmt.Fprintln(os.Stderr, "holder:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func holder(arg string) error {
	p := strings.SplitN(arg, ",", 4)
	if len(p) != 4 {
		return fmt.Errorf("bad argument %q", arg)
	}
	mode, url, addr, dir := p[0], p[1], p[2], p[3]
	ctx := context.Background()
	in := bufio.NewReader(os.Stdin)
	var write func(baton.Token, string) error
	switch mode {
	case "guard":
		write = func(tok baton.Token, v string) error {
			fmt.Printf("write %d %s\n", tok, v)
			l, err := in.ReadString('\n')
			if err != nil {
				return err
			}
			if l = strings.TrimSpace(l); l != "ok" {
				return errors.New(l)
			}
			return nil
		}
	case "file":
		f, err := fence.OpenFile(filepath.Join(dir, "fence"))
		if err != nil {
			return err
		}
		defer f.Close()
		write = func(tok baton.Token, v string) error {
			return f.Do(ctx, tok, func() error { return os.WriteFile(filepath.Join(dir, "data"), []byte(v), 0o644) })
		}
	case "redis":
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		f, err := redisfence.New(c, "res:fence")
		if err != nil {
			return err
		}
		write = func(tok baton.Token, v string) error { return f.Set(ctx, tok, "res", v, 0) }
	default:
		return fmt.Errorf("mode %q", mode)
	}
	b, err := redislock.OpenURL(ctx, url)
	if err != nil {
		return err
	}
	defer b.Close()
	m, err := b.Mutex(ctx, pausedName)
	if err != nil {
		return err
	}
	h, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	if err := write(h.Token(), "first"); err != nil {
		return fmt.Errorf("first write: %w", err)
	}
	fmt.Printf("held %d\n", h.Token())
	if _, err := in.ReadString('\n'); err != nil {
		return err
	}
	fmt.Printf("err %v\n", h.Err())
	// A holder that ignores the loss.
	fmt.Printf("wrote %v\n", write(h.Token(), "stale"))
	return nil
}

func TestPausedHolderGuard(t *testing.T) { testPausedHolder(t, "guard") }
func TestPausedHolderFile(t *testing.T)  { testPausedHolder(t, "file") }
func TestPausedHolderRedis(t *testing.T) { testPausedHolder(t, "redis") }

func testPausedHolder(t *testing.T, mode string) {
	ctx := context.Background()
	s := redistest.Start(t)
	url := s.URL(fmt.Sprintf("ttl=%v", pausedTTL))
	dir := t.TempDir()
	c := s.Client()

	// The resource and its guard, as the newer holder in this process
	// writes it and as the test reads it back.
	var g fence.Guard
	var guarded string
	var write func(baton.Token, string) error
	var read func() string
	switch mode {
	case "guard":
		write = func(tok baton.Token, v string) error { return g.Do(tok, func() error { guarded = v; return nil }) }
		read = func() string { return guarded }
	case "file":
		f, err := fence.OpenFile(filepath.Join(dir, "fence"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		write = func(tok baton.Token, v string) error {
			return f.Do(ctx, tok, func() error { return os.WriteFile(filepath.Join(dir, "data"), []byte(v), 0o644) })
		}
		read = func() string { b, _ := os.ReadFile(filepath.Join(dir, "data")); return string(b) }
	case "redis":
		f, err := redisfence.New(c, "res:fence")
		if err != nil {
			t.Fatal(err)
		}
		write = func(tok baton.Token, v string) error { return f.Set(ctx, tok, "res", v, 0) }
		read = func() string { return c.Get(ctx, "res").Val() }
	}

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHolder+"="+strings.Join([]string{mode, url, s.Addr(), dir}, ","))
	var stderr syncBuf
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string, 4)
	go func() {
		r := bufio.NewReader(out)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- strings.TrimSpace(l)
		}
	}()
	expect := func(prefix string) string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok || !strings.HasPrefix(l, prefix) {
				t.Fatalf("holder said %q, want %q\n%s", l, prefix, stderr.String())
			}
			return strings.TrimPrefix(l, prefix)
		case <-time.After(10 * time.Second):
			t.Fatalf("holder silent, want %q\n%s", prefix, stderr.String())
		}
		return ""
	}
	// serve applies a write the holder sends to the in-process guard.
	serve := func() error {
		var tok baton.Token
		var v string
		if _, err := fmt.Sscanf(expect("write "), "%d %s", &tok, &v); err != nil {
			t.Fatal(err)
		}
		err := write(tok, v)
		reply := "ok"
		if err != nil {
			reply = err.Error()
		}
		_, _ = io.WriteString(stdin, reply+"\n")
		return err
	}
	if mode == "guard" {
		if err := serve(); err != nil {
			t.Fatalf("the holder's first write: %v", err)
		}
	}
	oldTok, _ := strconv.ParseUint(expect("held "), 10, 64)
	if got := read(); got != "first" {
		t.Fatalf("after the holder's first write the resource holds %q", got)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}

	b, err := redislock.OpenURL(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, err := b.Mutex(ctx, pausedName)
	if err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	h, err := m.Lock(lctx)
	cancel()
	if err != nil {
		t.Fatalf("the paused holder's lease did not run out: %v", err)
	}
	if uint64(h.Token()) <= oldTok {
		t.Fatalf("new holder's token %d not above the paused one's %d", h.Token(), oldTok)
	}
	if err := write(h.Token(), "second"); err != nil {
		t.Fatalf("the new holder's write: %v", err)
	}

	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(stdin, "go\n")
	if e := expect("err "); !strings.Contains(e, baton.ErrLost.Error()) {
		t.Errorf("the resumed holder's Hold.Err is %q; want ErrLost", e)
	}
	if mode == "guard" {
		if err := serve(); !errors.Is(err, fence.ErrStale) {
			t.Errorf("the guard took the stale write: %v", err)
		}
	}
	if w := expect("wrote "); !strings.Contains(w, "stale token") {
		t.Errorf("the resumed holder's stale write reported %q; want a refusal", w)
	}
	if got := read(); got != "second" {
		t.Errorf("the resource holds %q, want the new holder's %q", got, "second")
	}
	if err := m.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
}

// syncBuf is a buffer that the process's stderr copier and the test can
// use at once.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
