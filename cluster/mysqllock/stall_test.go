package mysqllock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// The stalled-attempt test runs a requester in a process of its own (this
// test binary, with envTry set), which the test stops (SIGSTOP) in the
// middle of an attempt's transaction.
const envTry = "BATON_MYSQLLOCK_TRY"

// envClaim makes the helper a claimant of a queue (runClaim).
const envClaim = "BATON_MYSQLLOCK_CLAIM"

// runLooping runs a helper that loops until it is killed or its stdin
// closes: it opens the backend of envHoldURL and calls loop with it and
// the name in envHoldName, reporting an error as "error ...".
func runLooping(loop func(ctx context.Context, b baton.Backend, name string) error) int {
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	ctx := context.Background()
	b, err := OpenURL(ctx, os.Getenv(envHoldURL))
	if err == nil {
		defer b.Close()
		err = loop(ctx, b, os.Getenv(envHoldName))
	}
	fmt.Println("error", err)
	return 1
}

// runTry asks for the one permit of the semaphore over and over, with
// TryAcquire, so that it is mostly inside an attempt's transaction; it
// says "trying" first.
func runTry() int {
	return runLooping(func(ctx context.Context, b baton.Backend, name string) error {
		s, err := b.Semaphore(ctx, name, 1)
		if err != nil {
			return err
		}
		fmt.Println("trying")
		for {
			if _, err := s.TryAcquire(ctx, 1); err == nil {
				_ = s.Release(ctx, 1)
			} else if !errors.Is(err, baton.ErrLocked) {
				return err
			}
		}
	})
}

// runClaim claims jobs of the queue two at a time (a claim of several
// jobs takes two requests, with its transaction open between them), acks
// them and puts them again, over and over, going on after errors (its
// session ended by the server while it was stopped); it says "claiming"
// first.
func runClaim() int {
	return runLooping(func(ctx context.Context, b baton.Backend, name string) error {
		q, err := b.Queue(ctx, name)
		if err != nil {
			return err
		}
		fmt.Println("claiming")
		for {
			cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			js, _ := q.ClaimBatch(cctx, 2)
			cancel()
			// Each job done is put again, so that there is always one to
			// claim (a job given back would run out of attempts).
			for _, j := range js {
				if j.Ack(ctx) == nil {
					_, _ = q.Put(ctx, []byte("free"))
				}
			}
		}
	})
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
	stalls(t, s, cmd, time.Second, 3, h.Err, func() error { return sem.Release(ctx, 1) })
}

// TestStalledClaim: a claimant of a queue is stopped while a claim of
// several jobs has its transaction open between its two requests, the
// claimed job of another client among the rows its pick passed. The
// server ends the stalled session after the claim's idle limit, so the
// other client's claim keeps its lease (3 s here, which that limit, 1 s,
// fits in) and its Ack goes through.
func TestStalledClaim(t *testing.T) {
	s := sharedServer(t)
	createDB(t, s, "baton")
	ctx := context.Background()
	url := s.url("ttl=3s")
	name := testName(t)
	j, _ := claimedAndPending(t, openT(t, url), name)
	cmd, _, out := startHelper(t, envClaim+"=1", envHoldURL+"="+url, envHoldName+"="+name)
	if l, err := bufio.NewReader(out).ReadString('\n'); err != nil || l != "claiming\n" {
		t.Fatalf("claimant: %q, %v", l, err)
	}
	stalls(t, s, cmd, 3*time.Second, 1, j.Err, func() error { return j.Ack(ctx) })
}

// TestRenewalPassesPickedRows: a claim's renewal finds its row by its key,
// so a pending row of the queue that another client's claim has locked
// and not yet committed (here a transaction of the test's, held for a
// lease and a half) does not hold it back. (The rows a claim's pick
// passes are another matter: see TestStalledClaim.)
func TestRenewalPassesPickedRows(t *testing.T) {
	s := sharedServer(t)
	createDB(t, s, "baton")
	ctx := context.Background()
	const ttl = time.Second
	name := testName(t)
	j, picked := claimedAndPending(t, openT(t, s.url("ttl=1s")), name)
	tx, err := s.admin(t).BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var id uint64
	if err := tx.QueryRowContext(ctx, "SELECT id FROM baton.baton_job WHERE queue = ? AND id = ? FOR UPDATE", name, uint64(picked)).Scan(&id); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl * 3 / 2)
	if err := j.Err(); err != nil {
		t.Fatalf("the claim was lost while another job's row was locked: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := j.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// claimedAndPending puts two jobs on the queue name of b and claims the
// first: it returns the claim and the id of the pending job.
func claimedAndPending(t *testing.T, b baton.Backend, name string) (*baton.Job, baton.JobID) {
	t.Helper()
	ctx := context.Background()
	q, err := b.Queue(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Put(ctx, []byte("held")); err != nil {
		t.Fatal(err)
	}
	j, err := q.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pending, err := q.Put(ctx, []byte("pending"))
	if err != nil {
		t.Fatal(err)
	}
	return j, pending
}

// stalls stops the helper cmd inside a transaction that holds row locks
// (seen in two reads of information_schema.innodb_trx 100 ms apart: the
// test's own statements are single, short transactions), wherever in it
// that is, rounds times for a lease (ttl) and a half each, checking lost
// after each; then once more, for end, which must succeed within half a
// lease.
func stalls(t *testing.T, s *server, cmd *exec.Cmd, ttl time.Duration, rounds int, lost func() error, end func() error) {
	t.Helper()
	adm := s.admin(t)
	// A transaction holding row locks, seen in two reads 100 ms apart
	// (the server refreshes innodb_trx at most every 100 ms, so the first
	// read may show a moment before the stop).
	open := func() bool {
		var first, second string
		const q = `SELECT COALESCE(MIN(trx_id), '') FROM information_schema.innodb_trx WHERE trx_rows_locked > 0`
		if err := adm.QueryRow(q).Scan(&first); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		if err := adm.QueryRow(q).Scan(&second); err != nil {
			t.Fatal(err)
		}
		return first != "" && first == second
	}
	// The helper is inside a transaction for a small part of its loop
	// (less on a loaded machine): it is stopped at many moments, for up
	// to a minute, until one is inside.
	stall := func() {
		for try, deadline := 0, time.Now().Add(time.Minute); time.Now().Before(deadline); try++ {
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
		t.Fatal("the helper was never stopped inside a transaction")
	}
	for round := 0; round < rounds; round++ {
		stall()
		time.Sleep(ttl * 3 / 2)
		if err := lost(); err != nil {
			t.Fatalf("round %d: the hold was lost while another client's transaction stalled: %v", round, err)
		}
		if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	stall()
	t0 := time.Now()
	if err := end(); err != nil {
		t.Fatalf("the release while another client's transaction stalled: %v", err)
	}
	if d := time.Since(t0); d > ttl/2 {
		t.Errorf("the release took %v while another client's transaction stalled", d)
	}
}
