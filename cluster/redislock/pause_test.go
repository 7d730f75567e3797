package redislock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// A paused holder: the test binary re-executed with envPause set to a
// backend URL takes a Mutex and reads its Hold.Err without pause, until it
// finds that it was stopped (the clock jumped by more than 1.5 TTL between
// two reads); it then reports that first read after the pause.
const (
	envPause  = "BATON_REDISLOCK_PAUSE_URL"
	pauseName = "pause"
	pauseTTL  = time.Second
)

func init() {
	if u := os.Getenv(envPause); u != "" {
		if err := pausedHolder(u); err != nil {
			fmt.Fprintln(os.Stderr, "paused holder:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

func pausedHolder(url string) error {
	ctx := context.Background()
	b, err := OpenURL(ctx, url)
	if err != nil {
		return err
	}
	defer b.Close()
	m, err := b.Mutex(ctx, pauseName)
	if err != nil {
		return err
	}
	hd, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	fmt.Println("held")
	last := time.Now()
	for {
		// A pause before t1 means Err was called after it; a pause
		// between t1 and t2 leaves open which side Err was on, and the
		// next call is then the first known to come after it.
		t1 := time.Now()
		err := hd.Err()
		t2 := time.Now()
		long := pauseTTL * 3 / 2
		if t1.Sub(last) <= long && t2.Sub(t1) > long {
			err = hd.Err()
		}
		if gap := t2.Sub(last); gap > long {
			fmt.Printf("resumed after %v: Err %v\n", gap.Round(time.Millisecond), err)
			return nil
		}
		if err != nil {
			fmt.Printf("lost before the pause: %v\n", err)
			return nil
		}
		last = t2
	}
}

// TestPausedHolderReadsLost stops a holder past its lease, lets another
// client take the lock meanwhile, and resumes it: the first Err it reads
// must report the loss, before any timer of its own has had a chance.
func TestPausedHolderReadsLost(t *testing.T) {
	s := startRedis(t)
	url := s.URL(fmt.Sprintf("ttl=%v", pauseTTL))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envPause+"="+url)
	var stderr syncBuf
	cmd.Stderr = &stderr
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
	lines := make(chan string, 2)
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
			return l
		case <-time.After(10 * time.Second):
			t.Fatalf("holder silent, want %q\n%s", prefix, stderr.String())
		}
		return ""
	}
	expect("held")
	time.Sleep(100 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()

	ctx := context.Background()
	b, err := OpenURL(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, err := b.Mutex(ctx, pauseName)
	if err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = m.Lock(lctx)
	cancel()
	if err != nil {
		t.Fatalf("the paused holder's lease did not expire: %v", err)
	}
	time.Sleep(time.Until(stopped.Add(pauseTTL * 5 / 2)))
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	l := expect("resumed")
	if !strings.Contains(l, baton.ErrLost.Error()) {
		t.Errorf("the holder, paused while another client held the lock, read %q; want ErrLost", l)
	}
	if err := m.Unlock(ctx); err != nil && !errors.Is(err, baton.ErrLost) {
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
