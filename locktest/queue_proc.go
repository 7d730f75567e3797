package locktest

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"testing"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/fence"
)

// Queue tests across processes: helper roles and the tests that SIGKILL
// them.

// killSize returns the size of the kill test: 2,000 jobs through 4
// claimant processes and at most 40 kills (what CI runs), or, with
// BATON_QUEUE_KILL_JOBS=N in the environment, N jobs through 8 claimants
// killed every few tens of milliseconds until the queue drains (the full
// run: N=100000).
func killSize() (jobs, workers, kills int) {
	if n, err := strconv.Atoi(os.Getenv("BATON_QUEUE_KILL_JOBS")); err == nil && n > 0 {
		return n, 8, 1 << 30
	}
	return 2000, 4, 40
}

// helperQueue runs the queue roles:
//
//   - queue-worker claims jobs whose payload is an index below
//     a.Iterations, logs each claim (index, token, pid) to a.History,
//     fails one first attempt in ten (logged with a mark F), applies the
//     job's effect through a fence of the job in a.Dir (a file
//     effect-INDEX, written once), and acks it;
//   - queue-producer puts batches of 10 jobs "k/i" for ever.
func helperQueue(b baton.Backend, role string, a helperArgs) error {
	ctx := context.Background()
	q, err := b.Queue(ctx, a.Name)
	if err != nil {
		return err
	}
	defer q.Close()
	fmt.Println("ready")
	if role == "queue-producer" {
		for k := 0; ; k++ {
			specs := make([]baton.JobSpec, 10)
			for i := range specs {
				specs[i].Payload = []byte(fmt.Sprintf("%d/%d", k, i))
			}
			if _, err := q.PutBatch(ctx, specs); err != nil && !errors.Is(err, baton.ErrFull) {
				return err
			}
		}
	}
	log, err := os.OpenFile(a.History, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	pid := os.Getpid()
	for {
		j, err := q.Claim(ctx)
		if err != nil {
			return err
		}
		idx, err := jobIndex(j.Payload(), a.Iterations)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(log, "%d %d %d\n", idx, j.Token(), pid); err != nil {
			return err
		}
		if j.Attempt() == 1 && rand.IntN(10) == 0 {
			// A failed first attempt: the job comes back by Fail.
			if _, err := fmt.Fprintf(log, "%d %d %d F\n", idx, j.Token(), pid); err != nil {
				return err
			}
			if err := j.Fail(ctx, "flaky"); err != nil {
				return err
			}
			continue
		}
		if err := applyOnce(ctx, a.Dir, idx, j.Token(), pid); err != nil {
			return err
		}
		if rand.IntN(4) == 0 {
			time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
		}
		if err := j.Ack(ctx); err != nil {
			return err
		}
	}
}

// applyOnce is a job's effect: the file effect-idx, written under the
// job's fence with the claim's token unless it exists.
func applyOnce(ctx context.Context, dir string, idx int, tok baton.Token, pid int) error {
	f, err := fence.OpenFile(filepath.Join(dir, fmt.Sprintf("fence-%d", idx)))
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Do(ctx, tok, func() error {
		p := filepath.Join(dir, fmt.Sprintf("effect-%d", idx))
		if _, err := os.Stat(p); err == nil {
			return nil // done by a claimant that died before its Ack
		}
		// Written whole or not at all: a claimant killed here leaves a
		// temporary file, not a torn effect.
		tmp := fmt.Sprintf("%s.%d", p, pid)
		if err := os.WriteFile(tmp, []byte(fmt.Sprintf("%d %d\n", tok, pid)), 0o600); err != nil {
			return err
		}
		return os.Rename(tmp, p)
	})
}

// testQueueCrossProcess: a claimant blocked here is woken by a Put of
// another process; jobs put here are done by helper processes.
func testQueueCrossProcess(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	q := openQueue(t, b, ctx, name)
	dir := t.TempDir()
	const n = 200
	for i := range n {
		_, err := q.Put(ctx, []byte(strconv.Itoa(i)))
		ok(t, "Put", err)
	}
	var ps []*proc
	for k := range 3 {
		p := spawn(t, e, "queue-worker", helperArgs{Name: name, Iterations: n, Dir: dir, History: filepath.Join(dir, fmt.Sprint("claims-", k))})
		p.expect(t, "ready", 30*time.Second)
		ps = append(ps, p)
	}
	waitDrained(t, q, 60*time.Second)
	for _, p := range ps {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
	checkEffects(t, dir, n)
	// A producer in another process wakes a claimant blocked here.
	got := make(chan error, 1)
	go func() {
		j, err := q.Claim(ctx)
		if err == nil {
			err = j.Ack(ctx)
		}
		got <- err
	}()
	time.Sleep(30 * time.Millisecond)
	p := spawn(t, e, "queue-producer", helperArgs{Name: name})
	defer func() { _ = p.cmd.Process.Kill(); _ = p.cmd.Wait() }()
	ok(t, "Claim of a job put by another process", result(t, got, 30*time.Second, "a Put by another process did not wake the claimant"))
}

// waitDrained waits until the queue has no job left.
func waitDrained(t *testing.T, q baton.Queue, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		s, err := q.Stats(context.Background())
		ok(t, "Stats", err)
		if s == (baton.QueueStats{}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queue did not drain: %+v", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkEffects checks that each of the n jobs' effect was applied once.
func checkEffects(t *testing.T, dir string, n int) {
	t.Helper()
	missing := 0
	for i := range n {
		data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("effect-%d", i)))
		if err != nil {
			missing++
			continue
		}
		if strings.Count(string(data), "\n") != 1 {
			t.Errorf("effect of job %d applied more than once: %q", i, data)
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d jobs have no effect", missing, n)
	}
}

// testQueueKillClaimants: claimant processes SIGKILLed at random while
// jobs (see killSize) flow through fenced effects: every job's effect is applied
// exactly once and none is lost; a job is claimed again only after its
// claimant was killed (never while it lives); tokens are unique and
// increase in each claimant.
func testQueueKillClaimants(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	q := openQueue(t, b, ctx, name)
	dir := t.TempDir()
	killJobs, workers, maxKills := killSize()
	// Jobs go in as the queue has room for them (a backend's capacity may
	// be below killJobs), and at most QueueWaiting at a time where that is
	// set: the jobs then flow through as they are done.
	put, done := 0, 0
	putSome := func() {
		for put < killJobs {
			room := killJobs - put
			if w := e.s.Caps.QueueWaiting; w > 0 {
				room = min(room, w-(put-done))
			}
			if room < min(baton.MaxBatch/4, killJobs-put) && put > 0 {
				return
			}
			specs := make([]baton.JobSpec, min(baton.MaxBatch/4, killJobs-put))
			for k := range specs {
				specs[k].Payload = []byte(strconv.Itoa(put + k))
			}
			_, err := q.PutBatch(ctx, specs)
			if errors.Is(err, baton.ErrFull) {
				return
			}
			ok(t, "PutBatch", err)
			put += len(specs)
		}
	}
	putSome()
	killed := map[int]bool{}
	spawned := 0
	start := func() *proc {
		spawned++
		p := spawn(t, e, "queue-worker", helperArgs{Name: name, Iterations: killJobs, Dir: dir, History: filepath.Join(dir, fmt.Sprint("claims-", spawned))})
		p.expect(t, "ready", 30*time.Second)
		return p
	}
	var ps []*proc
	for range workers {
		ps = append(ps, start())
	}
	defer func() {
		for _, p := range ps {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	}()
	deadline := time.Now().Add(3*time.Minute + time.Duration(killJobs)*time.Millisecond)
	// A kill waits for some progress since the last one: a claimant
	// that takes longer to start than the kill interval (a slow connect
	// on a loaded machine) would otherwise never get to work.
	kills, doneAtKill, step := 0, 0, max(1, killJobs/1000)
	lastLog := time.Now()
	for {
		putSome()
		s, err := q.Stats(ctx)
		ok(t, "Stats", err)
		done = put - s.Ready - s.Delayed - s.InFlight - s.Dead
		if time.Since(lastLog) > 10*time.Second {
			lastLog = time.Now() // progress of a long run (-v)
			t.Logf("%d of %d jobs done, %d kills; %+v", done, killJobs, kills, s)
		}
		if put == killJobs && s == (baton.QueueStats{}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs left after %d kills: %d put, %+v", kills, put, s)
		}
		// Stats counts the whole queue, which on some servers walks
		// every job done since their last compaction: a long run, whose
		// kills come every step jobs anyway, asks it less often.
		time.Sleep(time.Duration(10+rand.IntN(40)) * time.Millisecond * time.Duration(min(4, step)))
		if kills < maxKills && done-doneAtKill >= step {
			doneAtKill = done
			k := rand.IntN(len(ps))
			killed[ps[k].cmd.Process.Pid] = true
			ok(t, "kill", ps[k].cmd.Process.Kill())
			_ = ps[k].cmd.Wait()
			kills++
			ps[k] = start()
		}
	}
	checkEffects(t, dir, killJobs)
	checkClaims(t, dir, killed)
	if ds, err := q.Dead(ctx, 10); err != nil || len(ds) != 0 {
		t.Errorf("dead letters %v, %v", ds, err)
	}
	t.Logf("%d jobs (at most %d waiting), %d claimant processes (%d at a time), %d SIGKILLed", killJobs, cmp.Or(e.s.Caps.QueueWaiting, killJobs), spawned, workers, kills)
}

type claimRec struct {
	idx, pid int
	tok      uint64
	failed   bool // the claimant failed the attempt
}

// checkClaims reads the claim logs of dir: tokens are unique and
// increase within each log, and a job claimed more than once was claimed
// again only after its claimant was killed.
func checkClaims(t *testing.T, dir string, killed map[int]bool) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "claims-*"))
	byJob := map[int][]claimRec{}
	seen := map[uint64]bool{}
	for _, l := range logs {
		f, err := os.Open(l)
		ok(t, "open log", err)
		var last uint64
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r claimRec
			var mark string
			n, _ := fmt.Sscan(sc.Text(), &r.idx, &r.tok, &r.pid, &mark)
			if n < 3 {
				continue // the last line of a killed claimant may be cut
			}
			if mark == "F" {
				if rs := byJob[r.idx]; len(rs) > 0 && rs[len(rs)-1].tok == r.tok {
					rs[len(rs)-1].failed = true
				}
				continue
			}
			if r.tok <= last || seen[r.tok] {
				t.Errorf("%s: token %d after %d (or seen before)", l, r.tok, last)
			}
			last, seen[r.tok] = r.tok, true
			byJob[r.idx] = append(byJob[r.idx], r)
		}
		f.Close()
	}
	for idx, rs := range byJob {
		slices.SortFunc(rs, func(a, b claimRec) int { return int(a.tok) - int(b.tok) })
		for _, r := range rs[:len(rs)-1] {
			if !killed[r.pid] && !r.failed {
				t.Errorf("job %d was claimed again (tokens %v) while its claimant %d lived", idx, rs, r.pid)
			}
		}
	}
}

// testQueueKillProducer: producers SIGKILLed in the middle of PutBatch
// leave every batch whole or absent.
func testQueueKillProducer(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	q := openQueue(t, b, ctx, name)
	for range 8 {
		p := spawn(t, e, "queue-producer", helperArgs{Name: name})
		p.expect(t, "ready", 30*time.Second)
		time.Sleep(time.Duration(1+rand.IntN(20)) * time.Millisecond)
		ok(t, "kill", p.cmd.Process.Kill())
		_ = p.cmd.Wait()
		// Drain, counting the jobs of each batch.
		batches := map[string]int{}
		got := map[string][]string{}
		for {
			j, err := q.TryClaim(ctx)
			if errors.Is(err, baton.ErrEmpty) {
				break
			}
			ok(t, "TryClaim", err)
			k, i, _ := strings.Cut(string(j.Payload()), "/")
			batches[k]++
			got[k] = append(got[k], fmt.Sprintf("%s(id %d, attempt %d)", i, j.ID(), j.Attempt()))
			ok(t, "Ack", j.Ack(ctx))
		}
		for k, n := range batches {
			if n != 10 {
				t.Errorf("batch %s has %d jobs of 10: %v", k, n, got[k])
			}
		}
	}
	wantStats(t, "after the producers", q, baton.QueueStats{})
}
