package locktest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// proc is a helper process.
type proc struct {
	cmd    *exec.Cmd
	stdout *bufio.Reader
	stderr *bytes.Buffer
}

// spawn re-executes the test binary as a helper process in role.
func spawn(t *testing.T, e *env, role string, a helperArgs) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		envHelper+"="+e.s.Name+"/"+role,
		envCfg+"="+e.cfg,
		envArgs+"="+encodeArgs(a))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start helper: %v", err)
	}
	p := &proc{cmd: cmd, stdout: bufio.NewReader(out), stderr: &stderr}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return p
}

// wait waits for the helper to exit and fails the test if it failed.
func (p *proc) wait(t *testing.T) {
	t.Helper()
	_, _ = io.Copy(io.Discard, p.stdout)
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("helper %v: %v\n%s", p.cmd.Env[len(p.cmd.Env)-3], err, p.stderr.String())
	}
}

// expect reads a line from the helper and fails unless it starts with want.
func (p *proc) expect(t *testing.T, want string, timeout time.Duration) string {
	t.Helper()
	type res struct {
		line string
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		l, err := p.stdout.ReadString('\n')
		ch <- res{l, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil || !strings.HasPrefix(r.line, want) {
			t.Fatalf("helper said %q (%v), want %q\n%s", r.line, r.err, want, p.stop())
		}
		return strings.TrimSpace(r.line)
	case <-time.After(timeout):
		t.Fatalf("helper silent for %v, want %q\n%s", timeout, want, p.stop())
	}
	return ""
}

// stop kills the helper and returns its stderr, once the copy of it has
// ended (Wait waits for that).
func (p *proc) stop() string {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
	return p.stderr.String()
}

func runHelper(role string, suites []Suite) int {
	suiteName, role, _ := strings.Cut(role, "/")
	var s *Suite
	for i := range suites {
		if suites[i].Name == suiteName {
			s = &suites[i]
		}
	}
	if s == nil {
		fmt.Fprintf(os.Stderr, "locktest helper: no suite %q\n", suiteName)
		return 2
	}
	var a helperArgs
	if err := json.Unmarshal([]byte(os.Getenv(envArgs)), &a); err != nil {
		fmt.Fprintf(os.Stderr, "locktest helper: args: %v\n", err)
		return 2
	}
	b, err := s.Open(os.Getenv(envCfg))
	if err != nil {
		fmt.Fprintf(os.Stderr, "locktest helper: open: %v\n", err)
		return 1
	}
	defer b.Close()
	switch role {
	case "locker":
		err = helperLocker(b, a)
	case "sem":
		err = helperSem(b, a)
	case "hold":
		err = helperHold(b, a)
	case "reclaim":
		err = helperReclaim(b, a)
	case "value-cas", "value-churn":
		err = helperValue(b, role, a)
	case "queue-worker", "queue-producer":
		err = helperQueue(b, role, a)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "locktest helper %s: %v\n", role, err)
		return 1
	}
	return 0
}

// bump increments the counter file without atomicity: only mutual
// exclusion keeps updates from being lost.
func bump(f *os.File) error {
	var buf [8]byte
	if _, err := f.ReadAt(buf[:], 0); err != nil && err != io.EOF {
		return err
	}
	binary.LittleEndian.PutUint64(buf[:], binary.LittleEndian.Uint64(buf[:])+1)
	_, err := f.WriteAt(buf[:], 0)
	return err
}

func readCounter(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	if len(b) < 8 {
		return 0, nil
	}
	return binary.LittleEndian.Uint64(b), nil
}

// helperLocker runs Handles × Goroutines workers that each lock
// Iterations times, bumping the counter under write holds.
func helperLocker(b baton.Backend, a helperArgs) error {
	ctx := context.Background()
	f, err := os.OpenFile(a.Counter, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	open := func() (baton.Mutex, error) { return openMutex(ctx, b, a.Name, a.ReadPercent > 0) }
	return runWorkers(a, open, func(m baton.Mutex, who string, hist *History) error {
		read := a.ReadPercent > 0 && rand.IntN(100) < a.ReadPercent
		var hd baton.Hold
		var err error
		if read {
			hd, err = m.(baton.RWMutex).RLock(ctx)
		} else {
			hd, err = m.Lock(ctx)
		}
		if err != nil {
			return err
		}
		start := Mono()
		if !read {
			if err := bump(f); err != nil {
				return err
			}
		}
		end := Mono()
		valid := hd.Err() == nil
		hist.Add(Rec{Start: start, End: end, Exclusive: !read, Token: uint64(hd.Token()), N: 1, Who: who})
		if read {
			return lostAfter(valid, m.(baton.RWMutex).RUnlock(ctx))
		}
		return lostAfter(valid, m.Unlock(ctx))
	})
}

// lostAfter is the error of a release whose hold was still valid (valid:
// its Err was nil when read after the interval the worker recorded). A
// hold lost after that, as a lease that lapses during a slow release on a
// loaded machine, leaves the interval sound: Err reports a loss before
// anyone else can be granted the lock. A hold lost before it fails the
// helper.
func lostAfter(valid bool, err error) error {
	if valid && errors.Is(err, baton.ErrLost) {
		return nil
	}
	return err
}

// runWorkers opens a.Handles handles and runs a.Goroutines workers on
// each, every worker calling step a.Iterations times (who names the
// worker in the history); a worker stops at its first error. It then
// returns the first error, or writes the history to a.History.
func runWorkers[H interface{ Close() error }](a helperArgs, open func() (H, error), step func(h H, who string, hist *History) error) error {
	var hist History
	var wg sync.WaitGroup
	errs := make(chan error, a.Handles*a.Goroutines)
	for h := 0; h < a.Handles; h++ {
		hd, err := open()
		if err != nil {
			return err
		}
		defer hd.Close()
		for g := 0; g < a.Goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				who := fmt.Sprintf("p%d/h%d/g%d", os.Getpid(), h, g)
				for i := 0; i < a.Iterations; i++ {
					if err := step(hd, who, &hist); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	return finishHistory(&wg, errs, a.History, &hist)
}

// finishHistory waits for the workers, then returns the first error they
// sent, or writes h to path.
func finishHistory(wg *sync.WaitGroup, errs chan error, path string, h *History) error {
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return writeHistory(path, h)
}

func writeHistory(path string, h *History) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := h.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// helperSem acquires random counts of permits.
func helperSem(b baton.Backend, a helperArgs) error {
	ctx := context.Background()
	open := func() (baton.Semaphore, error) { return b.Semaphore(ctx, a.Name, a.Capacity) }
	return runWorkers(a, open, func(s baton.Semaphore, who string, hist *History) error {
		n := 1 + rand.Int64N(a.MaxN)
		hd, err := s.Acquire(ctx, n)
		if err != nil {
			return err
		}
		start := Mono()
		time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
		end := Mono()
		valid := hd.Err() == nil
		hist.Add(Rec{Start: start, End: end, Token: uint64(hd.Token()), N: n, Who: who})
		return lostAfter(valid, s.Release(ctx, n))
	})
}

// helperHold takes a lock (Kind "mutex", "rw", "sem"), says "held TOKEN",
// and keeps it until it is killed or HoldFor has passed.
func helperHold(b baton.Backend, a helperArgs) error {
	ctx := context.Background()
	var h baton.Hold
	if a.Kind == "sem" {
		s, err := b.Semaphore(ctx, a.Name, a.Capacity)
		if err != nil {
			return err
		}
		if h, err = s.Acquire(ctx, a.MaxN); err != nil {
			return err
		}
	} else {
		m, err := openMutex(ctx, b, a.Name, a.Kind == "rw")
		if err != nil {
			return err
		}
		if h, err = m.Lock(ctx); err != nil {
			return err
		}
	}
	fmt.Printf("held %d\n", h.Token())
	hold := a.HoldFor
	if hold == 0 {
		hold = time.Hour
	}
	time.Sleep(hold)
	return nil
}

// openMutex opens name as an RWMutex when rw is set, else as a Mutex; the
// Lock of an RWMutex is its write lock.
func openMutex(ctx context.Context, b baton.Backend, name string, rw bool) (baton.Mutex, error) {
	if rw {
		return b.RWMutex(ctx, name)
	}
	return b.Mutex(ctx, name)
}
