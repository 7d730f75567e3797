//go:build linux

package shmrw

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/locktest"
)

// A hold log is a file mapped shared: a count, then records of four int64
// (start, end, token, exclusive). A process records a hold with plain
// stores, so a SIGKILL loses nothing written before it, at no system call
// per hold.
const (
	logRecs    = 1 << 21
	logSize    = 8 + logRecs*32
	envLog     = "BATON_SHMRW_LOG"
	envCounted = "BATON_SHMRW_COUNTED" // the stress role also reads on the count
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
		recs = append(recs, locktest.Rec{Start: r[0], End: e, Exclusive: r[3] == 1, Token: uint64(r[2]), N: 1, Who: who})
	}
	return recs, open
}

// stressRole runs 3 handles, one goroutine each, taking the lock in random
// modes (1 in 5 a write, a quarter of which are downgraded) until killed or
// the log is full.
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
	errc := make(chan error, 6)
	counted := os.Getenv(envCounted) != ""
	for range 3 {
		l, err := Open(ns, os.Getenv(envName))
		if err != nil {
			return err
		}
		if counted {
			go func() { errc <- countedReads(l, lg) }()
		}
		go func() {
			for {
				mode := driver.Shared
				if rand.IntN(5) == 0 {
					mode = driver.Exclusive
				}
				g, err := l.Acquire(ctx, mode)
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
				r[2], r[3] = int64(g.Token), int64(mode^1)
				r[0] = locktest.Mono()
				r[1] = locktest.Mono()
				if mode == driver.Exclusive && rand.IntN(4) == 0 {
					// Downgraded: the read hold that follows is recorded
					// as one more hold.
					if g, err = l.Downgrade(ctx, g); err != nil {
						errc <- err
						return
					}
					if i = lg.count.Add(1) - 1; i < logRecs {
						r = lg.rec(i)
						r[2] = int64(g.Token)
						r[0] = locktest.Mono()
						r[1] = locktest.Mono()
					}
				}
				if err := l.Release(ctx, g); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	fmt.Println("ready")
	return <-errc
}

// countedReads takes read holds on l's count (as the core's count path
// does, beside the driver calls of another goroutine of the handle) and
// records them, until the log is full.
func countedReads(l *RW, lg *holdLog) error {
	for {
		if held, added := l.rd.TryRLock(); !held && !l.rd.RLock(added) {
			time.Sleep(10 * time.Microsecond) // a writer holds or waits
			continue
		}
		i := lg.count.Add(1) - 1
		if i >= logRecs {
			return nil
		}
		r := lg.rec(i)
		r[0] = locktest.Mono()
		runtime.Gosched() // held across a reschedule, as a reader may be
		r[1] = locktest.Mono()
		if done, taken := l.rd.TryRUnlock(); !done && !l.rd.RUnlockMore(taken) {
			return errors.New("counted read lost")
		}
	}
}

// TestKillStress runs processes of 3 handles each that take the lock in
// random modes, SIGKILLs and SIGSTOPs them at random (holders among them),
// and replaces the killed: the history of every hold shows no overlap with
// a write and strictly increasing writer tokens, and at the end, every
// process dead, the lock is free.
func TestKillStress(t *testing.T) { killStress(t, false) }

// TestKillStressCounted is TestKillStress with, beside each handle's
// goroutine, another that reads on the handle's count.
func TestKillStressCounted(t *testing.T) { killStress(t, true) }

func killStress(t *testing.T, counted bool) {
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
		env := []string{envLog + "=" + path}
		if counted {
			env = append(env, envCounted+"=1")
		}
		p := spawn(t, ns, "stress", "stress", env...)
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
	deadline := time.Now().Add(45 * time.Second)
	for kills < wantKills || total() < wantAcq || heldKills < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("after 45s: %d acquisitions, %d kills", total(), kills)
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
	for _, err := range locktest.Check(recs, 0) {
		t.Error(err)
	}
	writes := 0
	for _, r := range recs {
		if r.Exclusive {
			writes++
		}
	}
	t.Logf("%d holds (%d writes) by %d processes; %d SIGKILLs (%d while holding), %d SIGSTOPs", len(recs), writes, len(all), kills+procs, openAtKill, stops)
	if openAtKill < 3 { // a few suffice: how many depends on the scheduler
		t.Errorf("only %d processes were killed while holding", openAtKill)
	}
	// Every process is dead: the lock is free for a writer, whose TryAcquire
	// reclaims what the dead still hold.
	l := open(t, ns, "stress")
	ctx := context.Background()
	g, err := l.TryAcquire(ctx, driver.Exclusive)
	if err != nil {
		in, _ := Inspect(ns, "stress")
		t.Fatalf("TryAcquire after every process died: %v (%+v)", err, in)
	}
	if err := l.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	// A reader clears the writer-waiting flag of writers that died waiting.
	if g, err = l.TryAcquire(ctx, driver.Shared); err != nil {
		t.Fatalf("TryAcquire of a reader after every process died: %v", err)
	}
	if err := l.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	in, err := Inspect(ns, "stress")
	if err != nil || len(in.Holders) != 0 || in.Waiters != 0 {
		t.Fatalf("after the test: %+v, %v", in, err)
	}
}
