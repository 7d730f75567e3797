//go:build linux

package shmsem

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/locktest"
)

// A hold log is a file mapped shared: a count, then records of four int64
// (start, end, token, exclusive). A process records a hold with plain
// stores, so a SIGKILL loses nothing written before it, at no system call
// per hold.
const (
	logRecs = 1 << 21
	logSize = 8 + logRecs*32
	envLog  = "BATON_SHMSEM_LOG"
)

type holdLog struct {
	data  []byte
	count *atomic.Int64
}

func mapLog(path string, create bool) (*holdLog, error) {
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if create {
		if err := f.Truncate(logSize); err != nil {
			return nil, err
		}
	}
	data, err := unix.Mmap(int(f.Fd()), 0, logSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return &holdLog{data: data, count: (*atomic.Int64)(unsafe.Pointer(&data[0]))}, nil
}

func (l *holdLog) rec(i int64) *[4]int64 { return (*[4]int64)(unsafe.Pointer(&l.data[8+i*32])) }

// holding reports whether one of the last records is still open.
func (l *holdLog) holding() bool {
	n := min(l.count.Load(), logRecs)
	for i := max(n-3, 0); i < n; i++ {
		if r := l.rec(i); r[0] != 0 && r[1] == 0 {
			return true
		}
	}
	return false
}

func (l *holdLog) close() { unix.Munmap(l.data) }

// records returns the holds of the log of a process SIGKILLed at end. A
// process is dead for the locks from the moment SIGKILL is pending (its
// holds are taken over then), but threads of it still running on another
// CPU may go on for an instant: what it recorded after end is not a hold
// the lock vouches for, so holds end at end, at the latest, and those that
// began later are left out.
func (l *holdLog) records(who string, end int64) (recs []locktest.Rec, open int) {
	n := min(l.count.Load(), logRecs)
	for i := range n {
		r := l.rec(i)
		if r[0] == 0 || r[0] > end {
			continue // not written before the process died
		}
		e := r[1]
		if e == 0 || e > end {
			open++
			e = end
		}
		recs = append(recs, locktest.Rec{Start: r[0], End: e, Token: uint64(r[2]), N: r[3], Who: who})
	}
	return recs, open
}

// stressRole runs 3 handles of a semaphore of stressCap permits, one
// goroutine each, taking random 1 to 3 permits (and giving back
// some of them early, a quarter of the time) until killed or the log is
// full.
func stressRole() error {
	ns, err := ipc.OpenNamespace(os.Getenv(envDir))
	if err != nil {
		return err
	}
	lg, err := mapLog(os.Getenv(envLog), false)
	if err != nil {
		return err
	}
	ctx := context.Background()
	errc := make(chan error, 3)
	for range 3 {
		s, err := Open(ns, os.Getenv(envName), stressCap)
		if err != nil {
			return err
		}
		go func() {
			for {
				n := 1 + rand.Int64N(3)
				g, err := s.Acquire(ctx, n)
				if err != nil {
					errc <- err
					return
				}
				i := lg.count.Add(1) - 1
				if i >= logRecs {
					errc <- nil
					return
				}
				r := lg.rec(i)
				r[3] = n
				r[0] = locktest.Mono()
				r[1] = locktest.Mono()
				if k := rand.Int64N(n); k > 0 && rand.IntN(4) == 0 {
					// Part given back first: the rest is one more hold.
					if err := s.Release(ctx, g, k); err != nil {
						errc <- err
						return
					}
					if i = lg.count.Add(1) - 1; i < logRecs {
						r = lg.rec(i)
						r[3] = n - k
						r[0] = locktest.Mono()
						r[1] = locktest.Mono()
					}
					n -= k
				}
				if err := s.Release(ctx, g, n); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	fmt.Println("ready")
	return <-errc
}

const stressCap = 8

// stallCheck returns a check of a growing count, called often: it fails
// once the count has not grown for d.
func stallCheck(d time.Duration) func(n int64) error {
	last, at := int64(-1), time.Now()
	return func(n int64) error {
		if n != last {
			last, at = n, time.Now()
			return nil
		}
		if time.Since(at) > d {
			return fmt.Errorf("stalled: %d acquisitions, none for %v", n, d)
		}
		return nil
	}
}

// TestKillStress runs processes of 3 handles each that take random numbers
// of permits, SIGKILLs and SIGSTOPs them at random (holders among them),
// and replaces the killed: the history of every hold never shows more than
// the capacity held, and at the end, every process dead, every permit is
// free.
func TestKillStress(t *testing.T) {
	procs, wantAcq, wantKills := 5, int64(1_000_000), 100
	if testing.Short() {
		wantAcq, wantKills = 100_000, 20
	}
	ns := newNS(t)
	dir := t.TempDir()
	type live struct {
		p   *proc
		log *holdLog
		pid int
	}
	var all []live
	killedAt := map[int]int64{}
	seq := 0
	start := func() live {
		seq++
		path := filepath.Join(dir, fmt.Sprintf("h%d.log", seq))
		lg, err := mapLog(path, true)
		if err != nil {
			t.Fatal(err)
		}
		p := spawn(t, ns, "stress", "stress", stressCap, 0, envLog+"="+path)
		h := live{p, lg, p.cmd.Process.Pid}
		all = append(all, h)
		return h
	}
	running := make([]live, procs)
	for i := range running {
		running[i] = start()
	}
	total := func() int64 {
		var n int64
		for _, h := range all {
			n += min(h.log.count.Load(), logRecs)
		}
		return n
	}
	// heldKills counts kills of a stopped holder: certain kills while
	// holding, which the test needs a few of whatever the scheduler does.
	kills, stops, heldKills := 0, 0, 0
	// A loaded machine may not reach the counts in time: past the
	// deadline the run ends where it is, unless it has stalled.
	deadline := time.Now().Add(45 * time.Second)
	progress := stallCheck(5 * time.Second)
	for kills < wantKills || total() < wantAcq || heldKills < 3 {
		if err := progress(total()); err != nil {
			t.Fatalf("%v (%d kills)", err, kills)
		}
		if time.Now().After(deadline) {
			if total() < wantAcq/10 || kills < wantKills/10 {
				t.Fatalf("after 45s: %d acquisitions, %d kills", total(), kills)
			}
			t.Logf("after 45s: %d acquisitions, %d kills; ending there", total(), kills)
			break
		}
		time.Sleep(time.Duration(5+rand.IntN(10)) * time.Millisecond)
		// Prefer a process that holds now.
		i := rand.IntN(procs)
		for _, j := range rand.Perm(procs) {
			if running[j].log.holding() {
				i = j
				break
			}
		}
		h := running[i]
		if rand.IntN(2) == 0 {
			// Paused for a while; then killed if it holds (what it holds
			// cannot change while it is stopped), else resumed or killed.
			_ = locktest.Stop(h.pid)
			time.Sleep(time.Duration(1+rand.IntN(3)) * time.Millisecond)
			stops++
			if !h.log.holding() {
				if rand.IntN(3) != 0 {
					_ = h.p.cmd.Process.Signal(syscall.SIGCONT)
					continue
				}
			} else {
				heldKills++
			}
		}
		killedAt[h.pid] = locktest.Mono()
		h.p.kill()
		kills++
		running[i] = start()
	}
	for _, h := range running {
		killedAt[h.pid] = locktest.Mono()
		h.p.kill()
	}
	var recs []locktest.Rec
	openAtKill := 0
	for _, h := range all {
		r, open := h.log.records(fmt.Sprint(h.pid), killedAt[h.pid])
		recs = append(recs, r...)
		openAtKill += open
		h.log.close()
	}
	for _, err := range locktest.Check(recs, stressCap) {
		t.Error(err)
	}
	t.Logf("%d holds by %d processes; %d SIGKILLs (%d while holding), %d SIGSTOPs", len(recs), len(all), kills+procs, openAtKill, stops)
	if openAtKill < 3 { // a few suffice: how many depends on the scheduler
		t.Errorf("only %d processes were killed while holding", openAtKill)
	}
	// Every process is dead: every permit is free, TryAcquire reclaiming
	// what the dead still hold.
	s := open(t, ns, "stress", stressCap)
	ctx := context.Background()
	g, err := s.TryAcquire(ctx, stressCap)
	if err != nil {
		in, _ := Inspect(ns, "stress")
		t.Fatalf("TryAcquire of every permit after every process died: %v (%+v)", err, in)
	}
	if err := s.Release(ctx, g, stressCap); err != nil {
		t.Fatal(err)
	}
	in, err := Inspect(ns, "stress")
	if err != nil || len(in.Holders) != 0 || in.Waiters != 0 || s.Available() != stressCap {
		t.Fatalf("after the test: %+v, %v", in, err)
	}
}
