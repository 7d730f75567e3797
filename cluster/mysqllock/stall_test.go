package mysqllock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// The stalled-attempt test runs a requester in a process of its own (this
// test binary, with envTry set), which the test stops (SIGSTOP) in the
// middle of an attempt's transaction.
const envTry = "BATON_MYSQLLOCK_TRY"

// runTry asks for the one permit of the semaphore named by envHoldName
// over and over, with TryAcquire, so that it is mostly inside an
// attempt's transaction; it says "trying" first, and ends when its stdin
// closes.
func runTry() int {
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	ctx := context.Background()
	b, err := OpenURL(ctx, os.Getenv(envHoldURL))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer b.Close()
	s, err := b.Semaphore(ctx, os.Getenv(envHoldName), 1)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("trying")
	for {
		if _, err := s.TryAcquire(ctx, 1); err == nil {
			_ = s.Release(ctx, 1)
		} else if !errors.Is(err, baton.ErrLocked) {
			fmt.Println("error", err)
			return 1
		}
	}
}

// TestStalledAttempt: a requester of a Semaphore is stopped while its
// attempt's transaction is open, for several leases. The holder's renewals
// and its release must not wait for that transaction: a client that stalls
// (paused, swapped out, cut off) in the middle of a request must not make
// the holders of the name lose their leases.
func TestStalledAttempt(t *testing.T) {
	s := sharedServer(t)
	createDB(t, s, "baton")
	ctx := context.Background()
	const ttl = time.Second
	url := s.url("ttl=1s")
	name := testName(t)
	b := openT(t, url)
	sem, err := b.Semaphore(ctx, name, 1)
	if err != nil {
		t.Fatal(err)
	}
	h, err := sem.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	cmd, _, out := startHelper(t, envTry+"=1", envHoldURL+"="+url, envHoldName+"="+name)
	if l, err := bufio.NewReader(out).ReadString('\n'); err != nil || l != "trying\n" {
		t.Fatalf("requester: %q, %v", l, err)
	}
	adm := s.admin(t)
	// An open transaction of the requester: one seen in two reads 100 ms
	// apart while the requester is stopped (the holder's own statements
	// are single, short transactions).
	open := func() bool {
		var first, second string
		const q = `SELECT COALESCE(MIN(trx_id), '') FROM information_schema.innodb_trx`
		if err := adm.QueryRow(q).Scan(&first); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		if err := adm.QueryRow(q).Scan(&second); err != nil {
			t.Fatal(err)
		}
		return first != "" && first == second
	}
	// Stop it inside a transaction: whatever point of the attempt that is,
	// the holder must not notice. Three stops of a lease and a half each,
	// then a fourth for the release.
	stall := func() {
		for try := 0; try < 100; try++ {
			if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			if open() {
				return
			}
			if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(try%7) * time.Millisecond)
		}
		t.Fatal("the requester was never stopped inside a transaction")
	}
	for round := 0; round < 3; round++ {
		stall()
		time.Sleep(ttl * 3 / 2)
		if err := h.Err(); err != nil {
			t.Fatalf("round %d: the holder lost its lease while a requester's transaction stalled: %v", round, err)
		}
		if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	stall()
	t0 := time.Now()
	if err := sem.Release(ctx, 1); err != nil {
		t.Fatalf("Release while a requester's transaction stalled: %v", err)
	}
	if d := time.Since(t0); d > ttl/2 {
		t.Errorf("Release took %v while a requester's transaction stalled", d)
	}
}
