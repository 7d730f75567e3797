package pglock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// A paused holder is the test binary re-executed with envPause set to the
// server's URL: it takes a Mutex, writes the row of pauseTable with its
// token (FencedUpdate), says so, and then reads Hold.Err in a loop until
// it sees the clock jump by more than 1.5 TTL between two reads (it was
// stopped); it reports the first read known to come after the pause, and
// then writes the row again as if it still held the lock.
const (
	envPause   = "PGLOCK_TEST_PAUSE"
	pauseName  = "fault-pause"
	pauseTable = "fenced_pause"
)

func pausedHolder(url string) int {
	ctx := context.Background()
	b, err := OpenURL(ctx, url, lease.WithTTL(faultTTL))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer b.Close()
	m, err := b.Mutex(ctx, pauseName)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	hd, err := m.Lock(ctx)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer pool.Close()
	write := func(v string) error {
		_, err := FencedUpdate(ctx, pool, pauseTable, "v = $1", "id = 1", hd.Token(), v)
		return err
	}
	if err := write("first"); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("held")
	long := faultTTL * 3 / 2
	last := time.Now()
	for {
		t1 := time.Now()
		err := hd.Err()
		t2 := time.Now()
		if t1.Sub(last) <= long && t2.Sub(t1) > long {
			// The pause fell inside Err: which side is unknown, the next
			// read is after it.
			err = hd.Err()
		}
		if gap := t2.Sub(last); gap > long {
			fmt.Printf("resumed after %v: Err %v\n", gap.Round(time.Millisecond), err)
			fmt.Printf("wrote %v\n", write("stale"))
			return 0
		}
		if err != nil {
			fmt.Printf("lost before the pause: %v\n", err)
			return 0
		}
		last = t2
	}
}

// TestPausedHolder stops a holder's process past its lease: the server
// ends its session, another client takes the lock and writes the fenced
// row, and the holder, resumed, reads its hold as lost on its first read,
// before its timers have run; its write, made all the same, is refused.
func TestPausedHolder(t *testing.T) {
	url := need(t)
	admin(t, "CREATE TABLE IF NOT EXISTS "+pauseTable+" (id int PRIMARY KEY, v text, fence bigint NOT NULL DEFAULT 0)")
	admin(t, "INSERT INTO "+pauseTable+" (id, v) VALUES (1, '') ON CONFLICT (id) DO UPDATE SET v = '', fence = 0")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envPause+"="+url)
	cmd.Stderr = os.Stderr
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
		defer close(lines)
		r := bufio.NewReader(out)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
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
				t.Fatalf("holder said %q, want %q", l, prefix)
			}
			return l
		case <-time.After(15 * time.Second):
			t.Fatalf("holder silent, want %q", prefix)
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
	m := mutexT(t, openT(t, url), pauseName)
	lctx, cancel := context.WithTimeout(ctx, 5*faultTTL)
	h, err := m.Lock(lctx)
	cancel()
	if err != nil {
		t.Fatalf("the paused holder's session was not ended: %v", err)
	}
	pool := poolT(t)
	if _, err := FencedUpdate(ctx, pool, pauseTable, "v = $1", "id = 1", h.Token(), "second"); err != nil {
		t.Fatalf("the new holder's write: %v", err)
	}
	time.Sleep(time.Until(stopped.Add(faultTTL * 5 / 2)))
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if l := expect("resumed"); !strings.Contains(l, baton.ErrLost.Error()) {
		t.Errorf("the holder, paused while another client held the lock, read %q; want ErrLost", l)
	}
	if l := expect("wrote"); !strings.Contains(l, baton.ErrLost.Error()) {
		t.Errorf("the resumed holder's write reported %q; want a refusal (ErrLost)", l)
	}
	var v string
	if err := pool.QueryRow(ctx, "SELECT v FROM "+pauseTable+" WHERE id = 1").Scan(&v); err != nil || v != "second" {
		t.Errorf("the row holds %q (%v), want the new holder's %q", v, err, "second")
	}
	if err := m.Unlock(ctx); err != nil && !errors.Is(err, baton.ErrLost) {
		t.Errorf("Unlock: %v", err)
	}
}
