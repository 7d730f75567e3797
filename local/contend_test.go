package local_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/local"
)

// Environment of the contending child process.
const (
	envContendDir  = "BATON_LOCAL_CONTEND_DIR"
	envContendSlot = "BATON_LOCAL_CONTEND_SLOT"
	envContendNone = "BATON_LOCAL_CONTEND_NONE" // count without locking
)

// contendBoard is a shared page: each child counts its acquisitions in its
// own cache line; the parent sets stop.
type contendBoard struct {
	stop  atomic.Int64
	_     [56]byte
	count [2]struct {
		n atomic.Int64
		_ [56]byte
	}
}

func openBoard(dir string) (*contendBoard, *ipc.Region, error) {
	ns, err := ipc.OpenNamespace(dir)
	if err != nil {
		return nil, nil, err
	}
	r, err := ipc.OpenRegion(ns, "board", "contend", 4096)
	if err != nil {
		return nil, nil, err
	}
	return (*contendBoard)(unsafe.Pointer(&r.Bytes()[0])), r, nil
}

// contendChild runs in a re-executed test binary: it locks and unlocks the
// futex mutex "contend" through the public API as fast as it can, counting
// on the board, until the parent sets stop. With envContendNone it only
// counts: the stalls it shows are the machine's, not the lock's.
func contendChild() int {
	dir := os.Getenv(envContendDir)
	var slot int
	fmt.Sscan(os.Getenv(envContendSlot), &slot)
	board, r, err := openBoard(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer r.Close()
	b, err := local.Open(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer b.Close()
	ctx := context.Background()
	m, err := b.Mutex(ctx, "contend")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	n := &board.count[slot].n
	if os.Getenv(envContendNone) != "" {
		for board.stop.Load() == 0 {
			n.Add(1)
		}
		return 0
	}
	for board.stop.Load() == 0 {
		if _, err := m.Lock(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		n.Add(1)
		if err := m.Unlock(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// BenchmarkTwoProcesses: two child processes lock and unlock one futex
// mutex through the public API, untimed; this process samples their
// counters every 200 µs. Reports acquisitions per second by both, the
// smaller process's share, and the longest time a child went without
// acquiring (its worst wait, to within the sampling period). The no-lock
// run samples children that only count: the longest stall the machine
// itself gives a busy process, which the lock's worst wait includes. Run
// with -benchtime=Nx: each iteration is one second.
func BenchmarkTwoProcesses(b *testing.B) {
	b.Run("futex", func(b *testing.B) { twoProcesses(b, false) })
	b.Run("no-lock", func(b *testing.B) { twoProcesses(b, true) })
}

func twoProcesses(b *testing.B, none bool) {
	var rates, stalls, shares []float64
	for b.Loop() {
		b.StopTimer()
		dir := shmDir(b)
		board, r, err := openBoard(dir)
		if err != nil {
			b.Fatal(err)
		}
		var cmds []*exec.Cmd
		for i := range 2 {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), envContendDir+"="+dir, fmt.Sprintf("%s=%d", envContendSlot, i))
			if none {
				cmd.Env = append(cmd.Env, envContendNone+"=1")
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			cmds = append(cmds, cmd)
		}
		for board.count[0].n.Load() == 0 || board.count[1].n.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
		var last [2]int64
		var lastMove [2]time.Time
		var stall time.Duration
		t0 := time.Now()
		c0 := [2]int64{board.count[0].n.Load(), board.count[1].n.Load()}
		for i := range 2 {
			last[i], lastMove[i] = c0[i], t0
		}
		for {
			time.Sleep(200 * time.Microsecond)
			now := time.Now()
			for i := range 2 {
				if c := board.count[i].n.Load(); c != last[i] {
					last[i], lastMove[i] = c, now
				} else if d := now.Sub(lastMove[i]); d > stall {
					stall = d
				}
			}
			if now.Sub(t0) >= time.Second {
				el := now.Sub(t0).Seconds()
				d0, d1 := last[0]-c0[0], last[1]-c0[1]
				rates = append(rates, float64(d0+d1)/el)
				shares = append(shares, float64(min(d0, d1))/float64(d0+d1)*100)
				break
			}
		}
		stalls = append(stalls, float64(stall.Microseconds())/1000)
		b.Logf("run: %.0f acq/s, worst wait %v", rates[len(rates)-1], stall)
		b.StopTimer()
		board.stop.Store(1)
		for _, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				b.Fatal(err)
			}
		}
		r.Close()
		b.StartTimer()
	}
	slices.Sort(rates)
	b.ReportMetric(rates[len(rates)/2], "ops/s")
	b.ReportMetric(slices.Max(stalls), "max-wait-ms")
	b.ReportMetric(slices.Min(shares), "min-share-%")
}
