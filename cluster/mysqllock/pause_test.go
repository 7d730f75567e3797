package mysqllock

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// The paused-holder test runs a holder in a process of its own (this test
// binary, with envHold set) so that SIGSTOP pauses its timers too.
const (
	envHold     = "BATON_MYSQLLOCK_HOLD"
	envHoldURL  = "BATON_MYSQLLOCK_URL"
	envHoldName = "BATON_MYSQLLOCK_NAME"
	pauseTable  = "fenced_pause"
)

// startHelper runs this test binary as a helper process with env added
// to its environment, its stdin and stdout piped to the test. When the
// test ends it is resumed (if stopped), its stdin closed, and killed if
// it has not exited within 5 s.
func startHelper(t *testing.T, env ...string) (*exec.Cmd, io.WriteCloser, io.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		stdin.Close()
		kill := time.AfterFunc(5*time.Second, func() { _ = cmd.Process.Kill() })
		_ = cmd.Wait()
		kill.Stop()
	})
	return cmd, stdin, out
}

// runHold is the paused holder: it locks, writes the row of pauseTable
// with its token (FencedUpdate), says so, and once told (after it was
// resumed) reports whether its hold still looks valid, whether a second
// write, made all the same, was refused, and what Unlock returns.
func runHold() int {
	ctx := context.Background()
	b, err := OpenURL(ctx, os.Getenv(envHoldURL))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer b.Close()
	m, err := b.Mutex(ctx, os.Getenv(envHoldName))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	h, err := m.Lock(ctx)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	cfg, _, err := parseURL(os.Getenv(envHoldURL))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer db.Close()
	write := func(v string) error {
		_, err := FencedUpdate(ctx, db, pauseTable, "v = ?", "id = 1", h.Token(), v)
		return err
	}
	if err := write("first"); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("held", h.Token())
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return 1
	}
	// The first thing it does once resumed: the other client holds by now.
	lost := h.Err() != nil
	fmt.Println("lost", lost)
	fmt.Println("write-lost", errors.Is(write("stale"), baton.ErrLost))
	fmt.Println("unlock-lost", errors.Is(m.Unlock(ctx), baton.ErrLost))
	return 0
}

// TestPausedHolder: a holder process is stopped (SIGSTOP) past its lease.
// Another client is granted the lock once the lease has run out (the server
// ends the paused session, and with it its GET_LOCK); when the holder runs
// again, the first read of its hold reports the loss, the write it makes
// all the same is refused by the row's fence (the new holder wrote it with
// its greater token), and its Unlock returns ErrLost.
func TestPausedHolder(t *testing.T) {
	s := sharedServer(t)
	createDB(t, s, "baton")
	ctx := context.Background()
	adm := s.admin(t)
	for _, q := range []string{
		"CREATE TABLE IF NOT EXISTS baton." + pauseTable + " (id INT PRIMARY KEY, v TEXT, fence BIGINT UNSIGNED NOT NULL DEFAULT 0)",
		"REPLACE INTO baton." + pauseTable + " (id, v, fence) VALUES (1, '', 0)",
	} {
		if _, err := adm.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	name := testName(t)
	cmd, stdin, out := startHelper(t, envHold+"=1", envHoldURL+"="+s.url(testQuery), envHoldName+"="+name)
	lines := make(chan string, 8)
	go func() {
		r := bufio.NewReader(out)
		for {
			l, err := r.ReadString('\n')
			if l != "" {
				lines <- strings.TrimSpace(l)
			}
			if err != nil {
				if err != io.EOF {
					lines <- "error " + err.Error()
				}
				close(lines)
				return
			}
		}
	}()
	next := func() string {
		select {
		case l := <-lines:
			return l
		case <-time.After(30 * time.Second):
			t.Fatal("the holder process said nothing for 30 s")
			return ""
		}
	}
	var token uint64
	if l := next(); !strings.HasPrefix(l, "held ") {
		t.Fatalf("holder: %q", l)
	} else {
		fmt.Sscan(strings.TrimPrefix(l, "held "), &token)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	b := openT(t, s.url(testQuery))
	m, _ := b.Mutex(ctx, name)
	lctx, cancel := context.WithTimeout(ctx, 4*testTTL)
	h, err := m.Lock(lctx)
	cancel()
	if err != nil {
		t.Fatalf("Lock while the holder is paused: %v", err)
	}
	t.Logf("granted %v after the holder was stopped", time.Since(stopped).Round(time.Millisecond))
	if uint64(h.Token()) <= token {
		t.Fatalf("token %d after the paused holder's %d", h.Token(), token)
	}
	if _, err := FencedUpdate(ctx, adm, "baton."+pauseTable, "v = ?", "id = 1", h.Token(), "second"); err != nil {
		t.Fatalf("the new holder's write: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	if l := next(); l != "lost true" {
		t.Fatalf("the resumed holder's first read of its hold: %q, want the loss (another client holds)", l)
	}
	if l := next(); l != "write-lost true" {
		t.Fatalf("the resumed holder's write: %q, want a refusal (ErrLost)", l)
	}
	var v string
	if err := adm.QueryRow("SELECT v FROM baton." + pauseTable + " WHERE id = 1").Scan(&v); err != nil || v != "second" {
		t.Errorf("the row holds %q (%v), want the new holder's %q", v, err, "second")
	}
	if l := next(); l != "unlock-lost true" {
		t.Fatalf("the resumed holder's Unlock: %q, want ErrLost", l)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
