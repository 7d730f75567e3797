//go:build unix

package fence_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/fence"
)

// The test binary re-executed with envHelper set to "dir,iterations" is a
// writer process: three goroutines (two on one File, one on a second File
// of the same path) write through dir/fence with tokens drawn from the
// clock a moment before, so that other writers overtake some of them.
const envHelper = "BATON_FENCE_WRITER"

func TestMain(m *testing.M) {
	if a := os.Getenv(envHelper); a != "" {
		if err := writer(a); err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// writer's fn bumps a counter file without atomicity and appends its token
// to a log: only the fence's lock keeps counts from being lost and the log
// in order. It prints "accepted A refused R".
func writer(arg string) error {
	dir, n, _ := strings.Cut(arg, ",")
	iters, err := strconv.Atoi(n)
	if err != nil {
		return err
	}
	ctx := context.Background()
	fa, err := fence.OpenFile(filepath.Join(dir, "fence"))
	if err != nil {
		return err
	}
	defer fa.Close()
	fb, err := fence.OpenFile(filepath.Join(dir, "fence"))
	if err != nil {
		return err
	}
	defer fb.Close()
	counter, err := os.OpenFile(filepath.Join(dir, "counter"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer counter.Close()
	logf, err := os.OpenFile(filepath.Join(dir, "log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	var mu sync.Mutex
	var accepted, refused int
	var firstErr error
	var wg sync.WaitGroup
	for i, f := range []*fence.File{fa, fa, fb} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(i)))
			for range iters {
				tok := baton.Token(time.Now().UnixNano())
				if r.IntN(3) == 0 {
					time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
				}
				err := f.Do(ctx, tok, func() error {
					var b [8]byte
					if _, err := counter.ReadAt(b[:], 0); err != nil && err != io.EOF {
						return err
					}
					v := binary.LittleEndian.Uint64(b[:])
					binary.LittleEndian.PutUint64(b[:], v+1)
					if _, err := counter.WriteAt(b[:], 0); err != nil {
						return err
					}
					binary.LittleEndian.PutUint64(b[:], uint64(tok))
					_, err := logf.Write(b[:])
					return err
				})
				var se *fence.StaleError
				mu.Lock()
				switch {
				case err == nil:
					accepted++
				case errors.As(err, &se) && se.Highest > tok:
					refused++
				case firstErr == nil:
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	fmt.Printf("accepted %d refused %d\n", accepted, refused)
	return nil
}

// TestFileCrossProcess: writer processes hammer one fence file; the
// writes that ran must have run one at a time (no lost count) and in
// non-decreasing token order, and the file must keep the last one.
func TestFileCrossProcess(t *testing.T) {
	const procs, iters = 4, 300
	dir := t.TempDir()
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envHelper+"="+dir+","+strconv.Itoa(iters))
		var out, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		outs = append(outs, &out)
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
			if t.Failed() && stderr.Len() > 0 {
				t.Log(stderr.String())
			}
		})
	}
	var accepted, refused int
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
		var a, r int
		if _, err := fmt.Sscanf(outs[i].String(), "accepted %d refused %d", &a, &r); err != nil {
			t.Fatalf("writer %d said %q: %v", i, outs[i].String(), err)
		}
		accepted += a
		refused += r
	}
	if accepted+refused != procs*3*iters {
		t.Errorf("%d accepted + %d refused, want %d", accepted, refused, procs*3*iters)
	}
	c, err := os.ReadFile(filepath.Join(dir, "counter"))
	if err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint64(c); got != uint64(accepted) {
		t.Errorf("counter %d after %d accepted writes: writes overlapped", got, accepted)
	}
	lg, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(lg) != 8*accepted {
		t.Fatalf("log of %d bytes for %d accepted writes", len(lg), accepted)
	}
	var last uint64
	for i := 0; i < len(lg); i += 8 {
		v := binary.LittleEndian.Uint64(lg[i:])
		if v < last {
			t.Fatalf("write %d ran with token %d after one with %d", i/8, v, last)
		}
		last = v
	}
	f, err := fence.OpenFile(filepath.Join(dir, "fence"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if h, err := f.Highest(context.Background()); err != nil || uint64(h) != last {
		t.Errorf("Highest %d, %v; last write %d", h, err, last)
	}
	if refused == 0 {
		t.Errorf("no write was refused: the test did not exercise stale tokens")
	}
	t.Logf("%d processes: %d accepted, %d refused", procs, accepted, refused)
}

func TestFileRules(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "data.fence")
	if _, err := fence.OpenFile(""); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("OpenFile(\"\"): %v", err)
	}
	f, err := fence.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := f.Highest(ctx); h != 0 || err != nil {
		t.Fatalf("new file: Highest %d, %v", h, err)
	}
	if err := f.Check(ctx, 0); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("Check(0): %v", err)
	}
	ran := 0
	write := func() error { ran++; return nil }
	// Tokens above 2^53 and 2^63 too: nothing goes through a float or int64.
	for _, tok := range []baton.Token{7, 7, 1<<53 + 1, 1<<63 + 5, 1<<63 + 5} {
		if err := f.Do(ctx, tok, write); err != nil {
			t.Fatalf("Do(%d): %v", tok, err)
		}
	}
	for _, tok := range []baton.Token{7, 1<<63 + 4} {
		if err := f.Do(ctx, tok, write); !errors.Is(err, fence.ErrStale) || !errors.Is(err, baton.ErrLost) {
			t.Errorf("Do(%d) after %d: %v, want ErrStale", tok, baton.Token(1<<63+5), err)
		}
	}
	if ran != 5 {
		t.Errorf("%d writes ran, want 5", ran)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(ctx, 1<<63+9); !errors.Is(err, baton.ErrClosed) {
		t.Errorf("Check after Close: %v", err)
	}
	// The token survives the handle.
	g, err := fence.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if h, err := g.Highest(ctx); h != 1<<63+5 || err != nil {
		t.Errorf("reopened: Highest %d, %v", h, err)
	}
	if err := g.Check(ctx, 1<<63+4); !errors.Is(err, fence.ErrStale) {
		t.Errorf("reopened: Check of a lower token: %v", err)
	}
}

// TestFileTornSlot: a slot whose write was torn by a crash is ignored and
// the other slot's token stands; two bad slots refuse everything.
func TestFileTornSlot(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "fence")
	f, err := fence.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, tok := range []baton.Token{10, 20, 30} { // 30 overwrites the slot of 10
		if err := f.Check(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var slot [16]byte
	for _, off := range []int64{0, 4096} {
		if _, err := raw.ReadAt(slot[:], off); err != nil {
			t.Fatal(err)
		}
		if binary.LittleEndian.Uint64(slot[:]) == 30 {
			// Half of a write of 40 reached the disk.
			binary.LittleEndian.PutUint32(slot[:], 40)
			if _, err := raw.WriteAt(slot[:4], off); err != nil {
				t.Fatal(err)
			}
		}
	}
	if h, err := f.Highest(ctx); h != 20 || err != nil {
		t.Fatalf("torn slot: Highest %d, %v; want the other slot's 20", h, err)
	}
	if err := f.Check(ctx, 19); !errors.Is(err, fence.ErrStale) {
		t.Errorf("torn slot: Check(19): %v", err)
	}
	if err := f.Check(ctx, 25); err != nil {
		t.Errorf("torn slot: Check(25): %v", err)
	}
	if h, err := f.Highest(ctx); h != 25 || err != nil {
		t.Errorf("after rewriting the torn slot: Highest %d, %v", h, err)
	}
	if _, err := raw.WriteAt([]byte("garbage!garbage!"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.WriteAt([]byte("garbage!garbage!"), 4096); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(ctx, 100); !errors.Is(err, fence.ErrCorrupt) {
		t.Errorf("two bad slots: Check: %v, want ErrCorrupt", err)
	}
}

func TestFileRemoved(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "fence")
	f, err := fence.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Check(ctx, 50); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	ran := false
	if err := f.Do(ctx, 60, func() error { ran = true; return nil }); err == nil || ran {
		t.Errorf("Do on a removed fence file: %v, ran %v; want a refusal", err, ran)
	}
}

// TestFileWaitCancelled: a Do that waits for another process's lock ends
// with its context and writes nothing.
func TestFileWaitCancelled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence")
	f, err := fence.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	other, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	ran := false
	if err := f.Do(ctx, 5, func() error { ran = true; return nil }); !errors.Is(err, context.DeadlineExceeded) || ran {
		t.Errorf("Do while another holds the file: %v, ran %v", err, ran)
	}
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if h, err := f.Highest(context.Background()); h != 0 || err != nil {
		t.Errorf("the cancelled Do recorded its token: Highest %d, %v", h, err)
	}
}

// TestFileWaitThenReplaced: a Do that waits in the kernel for another
// process's lock runs once the lock is free, and refuses when the file
// was replaced while it waited (the wait locks a descriptor of its own,
// opened by path, which then names another file).
func TestFileWaitThenReplaced(t *testing.T) {
	for _, replace := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "fence")
		f, err := fence.OpenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		other, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		ran := make(chan bool, 1)
		done := make(chan error, 1)
		go func() {
			done <- f.Do(context.Background(), 7, func() error { ran <- true; return nil })
		}()
		time.Sleep(50 * time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("Do returned while another held the file: %v", err)
		default:
		}
		if replace {
			if err := os.WriteFile(path+".new", nil, 0o666); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(path+".new", path); err != nil {
				t.Fatal(err)
			}
		}
		other.Close() // gives the lock back
		err = <-done
		switch {
		case replace && (err == nil || len(ran) > 0):
			t.Errorf("Do after the file was replaced while it waited: %v, ran %v; want a refusal", err, len(ran) > 0)
		case !replace && (err != nil || len(ran) == 0):
			t.Errorf("Do after the holder let go: %v, ran %v", err, len(ran) > 0)
		}
		if !replace {
			if h, err := f.Highest(context.Background()); h != 7 || err != nil {
				t.Errorf("Highest after the waited Do: %d, %v; want 7", h, err)
			}
		}
		f.Close()
	}
}
