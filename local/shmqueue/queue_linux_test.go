//go:build linux

package shmqueue

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
	"golang.org/x/sys/unix"
)

func open(t *testing.T) *Queue { return openB(t) }

func openB(t testing.TB) *Queue {
	t.Helper()
	ns, err := ipc.OpenNamespace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	q, err := OpenEntry(ns.Resolve(Kind, "q"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

func put(t *testing.T, q *Queue, payload string) uint64 {
	t.Helper()
	ids, err := q.Put(context.Background(), []driver.PutJob{{Payload: []byte(payload), MaxAttempts: 3}})
	if err != nil {
		t.Fatal(err)
	}
	return ids[0]
}

// deadProc returns the word of a process that has exited and been reaped.
func deadProc(t *testing.T) uint64 {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return uint64(12345)<<32 | uint64(cmd.Process.Pid)
}

// stage writes a job into a free slot as a producer does before its
// publication, and returns the slot.
func stage(q *Queue, payload string, stamp uint64) uint32 {
	i := q.take()
	copy(q.data(i), payload)
	q.sw(i, sID).Store(q.u64(offNextID).Add(1))
	q.sw(i, sToken).Store(stamp)
	q.sw(i, sDue).Store(0)
	q.sh(i, sMax).Store(3)
	q.sh(i, sLen).Store(uint32(len(payload)))
	q.sh(i, sLens).Store(0)
	q.sh(i, sKeyH).Store(0)
	q.sw(i, sState).Store(stStaged)
	return i
}

// A producer killed in the middle of a batch, holding the lock: the next
// caller takes the lock over, frees the staged slots of the unpublished
// batch, and keeps a published one that was not yet in the ring.
func TestDeadProducerLeavesNothingHalf(t *testing.T) {
	ctx := context.Background()
	q := open(t)
	put(t, q, "before")
	room := q.room(0)
	dead := deadProc(t)
	q.u64(offLock).Store(dead)
	// A published batch (its stamp committed) whose slots were not yet
	// made ready, then an unpublished one.
	c := q.u64(offCommitted).Load()
	stage(q, "published", c+1)
	i := stage(q, "pushing", c+1)
	q.u64(offCommitted).Store(c + 1)
	// The producer died inside the push of the second job, after its
	// order and ring entry, before its state.
	q.sw(i, sOrder).Store(q.back())
	t0 := q.u64(offTail).Load()
	q.ring(t0).Store(i)
	q.u64(offTail).Store(t0 + 1)
	stage(q, "half a", c+2)
	stage(q, "half b", c+2)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := q.Stats(cctx)
	if err != nil {
		t.Fatal(err)
	}
	if s != (driver.QueueStats{Ready: 3}) {
		t.Fatalf("Stats after a producer died mid-batch = %+v, want 3 ready", s)
	}
	if got := q.room(0); got != room-2 {
		t.Errorf("room %d, want %d: the unpublished slots are not free again", got, room-2)
	}
	for _, want := range []string{"before", "published", "pushing"} {
		cs, err := q.Claim(cctx, 1, false)
		if err != nil || string(cs[0].Payload) != want {
			t.Fatalf("Claim = %v, %v; want %q", cs, err, want)
		}
	}
	if _, err := q.Claim(ctx, 1, false); !errors.Is(err, baton.ErrEmpty) {
		t.Fatalf("Claim of the drained queue: %v", err)
	}
}

// joinOther starts a process that sleeps and enters it among the
// participants of q, as its own handle would; it returns its pid and its
// participant word. The process is not this one's child: its death sends
// this one no SIGCHLD, whose handler would end a futex wait as no other
// process's death does.
func joinOther(t *testing.T, q *Queue) (int, uint64) {
	t.Helper()
	out, err := exec.Command("sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Kill(pid, unix.SIGKILL) })
	p, _, okp, err := ipc.LookupProc(pid)
	if err != nil || !okp {
		t.Fatal(err, okp)
	}
	other := uint64(p.Tag())<<32 | uint64(p.PID)
	if _, err := q.lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	for k := range MaxProcs {
		if q.proc(k).Load() == 0 {
			q.proc(k).Store(other)
			break
		}
	}
	q.u64(offProcGen).Add(1)
	q.unlock(true)
	return pid, other
}

// A claimant that dies gives its job back as soon as it exits, through its
// pidfd: a claimant blocked here gets the job at once, as its second
// attempt, with a larger token.
func TestDeadClaimantGivenBackAtExit(t *testing.T) {
	ctx := context.Background()
	q := open(t)
	put(t, q, "job")
	pid, other := joinOther(t, q)
	// The other process claims the job, as its own handle would.
	if _, err := q.lock(ctx); err != nil {
		t.Fatal(err)
	}
	i := q.ring(q.u64(offHead).Load()).Load()
	q.u64(offHead).Add(1)
	tok := q.u64(offToken).Add(1)
	q.sw(i, sOwner).Store(other)
	q.sw(i, sToken).Store(tok)
	q.sw(i, sState).Store(1<<8 | stClaimed)
	q.unlock(true)

	got := make(chan driver.Claim, 1)
	go func() {
		cs, err := q.Claim(ctx, 1, true)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- cs[0]
	}()
	select {
	case c := <-got:
		t.Fatalf("claimed %+v while its claimant lives", c)
	case <-time.After(300 * time.Millisecond):
	}
	t0 := time.Now()
	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-got:
		// No timer is involved: the bound is for a loaded machine.
		el := time.Since(t0)
		if el > time.Second {
			t.Errorf("the job came back %v after its claimant was killed", el)
		}
		t.Logf("the job came back %v after its claimant was killed", el)
		if c.Attempt != 2 || c.Token <= tok || string(c.Payload) != "job" {
			t.Errorf("given back: %+v (first token %d)", c, tok)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job of a killed claimant did not come back")
	}
}

// A full queue refuses a batch that does not fit and adds none of it.
func TestFull(t *testing.T) {
	ctx := context.Background()
	q := open(t)
	batch := make([]driver.PutJob, 1000)
	for i := range batch {
		batch[i] = driver.PutJob{Payload: []byte("x"), MaxAttempts: 1}
	}
	for range Capacity / 1000 {
		if _, err := q.Put(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Put(ctx, batch); !errors.Is(err, baton.ErrFull) {
		t.Fatalf("Put into a full queue: %v", err)
	}
	s, _ := q.Stats(ctx)
	if s.Ready != Capacity/1000*1000 {
		t.Fatalf("Stats after a refused Put = %+v", s)
	}
}

// Removing the queue's file loses the claims of handles that hold some:
// their mapping is shared with no new opener.
func TestRemovedFileLosesClaims(t *testing.T) {
	ctx := context.Background()
	q := open(t)
	put(t, q, "x")
	cs, err := q.Claim(ctx, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(q.r.Path()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cs[0].Loss.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the claim was not lost when the file was removed")
	}
	if !errors.Is(cs[0].Loss.Err(), baton.ErrLost) {
		t.Errorf("loss: %v", cs[0].Loss.Err())
	}
}
