//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Worker processes are this binary re-executed with workerEnv set; the
// same dispatch runs from main and from the test binary's TestMain.
const workerEnv = "BATON_BENCH_WORKER"

type workerArgs struct {
	Role    string        `json:"role"`           // "contend", "hold", "wait", "etcd" or "etcd-hold"
	Prim    string        `json:"prim,omitempty"` // "mutex" (default), "sem", or "rw" (hold only)
	Permits int           `json:"permits,omitempty"`
	Subject string        `json:"subject"`
	Key     string        `json:"key"`
	Dir     string        `json:"dir"`
	Dur     time.Duration `json:"dur"`
	Addr    string        `json:"addr,omitempty"` // the etcd server of "etcd-hold"
}

type workerReport struct {
	Ops        int64          `json:"ops"`
	Untimed    int64          `json:"untimed"`
	UntimedSec float64        `json:"untimed_seconds"`
	Seconds    float64        `json:"seconds"`
	CPU        int64          `json:"cpu_ns"`
	Cycle      map[int]uint64 `json:"cycle"`
	Wait       map[int]uint64 `json:"wait"`
	Max        [2]int64       `json:"max"`
	Err        string         `json:"err,omitempty"`
}

func sparse(h *hist) map[int]uint64 {
	m := map[int]uint64{}
	for i, c := range h.counts {
		if c != 0 {
			m[i] = c
		}
	}
	return m
}

func unsparse(m map[int]uint64, mx int64) hist {
	var h hist
	for i, c := range m {
		if i >= 0 && i < len(h.counts) {
			h.counts[i] = c
			h.n += c
		}
	}
	h.max = mx
	return h
}

// workerMain runs a worker when this process is one; it reports whether it
// was and the exit code.
func workerMain() (bool, int) {
	raw := os.Getenv(workerEnv)
	if raw == "" {
		return false, 0
	}
	var a workerArgs
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return true, 2
	}
	if err := runWorker(a); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return true, 1
	}
	return true, 0
}

func runWorker(a workerArgs) error {
	switch a.Role {
	case "etcd":
		return etcdWorker(os.Stdin)
	case "etcd-hold":
		return etcdHoldWorker(a, os.Stdin)
	}
	ctx := context.Background()
	he, err := openHostEnv(a.Dir)
	if err != nil {
		return err
	}
	defer he.close()
	s, err := he.subject(a.Subject)
	if err != nil {
		return err
	}
	in := bufio.NewReader(os.Stdin)
	if a.Role == "hold" && a.Prim != "" && a.Prim != "mutex" {
		return holdWorker(ctx, s, a, in)
	}
	if a.Role == "wait" {
		return waitWorker(ctx, s, a, in)
	}
	if a.Prim == "sem" {
		if s.sem == nil || a.Role != "contend" {
			return fmt.Errorf("no semaphore %s of %s", a.Role, s.name)
		}
		h, err := s.sem(ctx, a.Key, a.Permits)
		if err != nil {
			return err
		}
		defer h.close()
		return contendWorker(ctx, semOp(h), in, a.Dur)
	}
	h, err := s.mutex(ctx, a.Key)
	if err != nil {
		return err
	}
	defer h.close()
	switch a.Role {
	case "hold":
		if err := h.lock(ctx); err != nil {
			return err
		}
		fmt.Println("held")
		_, _ = io.Copy(io.Discard, in) // until the parent kills us or closes stdin
		return h.unlock(ctx)
	case "contend":
		return contendWorker(ctx, mutexOp(h), in, a.Dur)
	}
	return fmt.Errorf("unknown role %q", a.Role)
}

// contendWorker warms o up, then runs it once per "go" line until stdin
// closes, reporting each run on stdout.
func contendWorker(ctx context.Context, o op, in *bufio.Reader, dur time.Duration) error {
	if err := warmUp(ctx, []op{o}); err != nil {
		return err
	}
	fmt.Println("ready")
	out := json.NewEncoder(os.Stdout)
	for {
		if _, err := in.ReadString('\n'); err != nil {
			return nil
		}
		c0 := cpuNow(nil)
		t0 := time.Now()
		r := contend(ctx, o, t0, dur, 0, op{})
		rep := workerReport{Ops: r.ops, Untimed: r.untimed, UntimedSec: r.untSec, Seconds: time.Since(t0).Seconds(), CPU: int64(cpuNow(nil) - c0),
			Cycle: sparse(&r.cycle), Wait: sparse(&r.wait), Max: [2]int64{r.cycle.max, r.wait.max}}
		if r.err != nil {
			rep.Err = r.err.Error()
		}
		if err := out.Encode(rep); err != nil {
			return err
		}
	}
}

type worker struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startWorker(a workerArgs) (*worker, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(a)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), workerEnv+"="+string(b))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &worker{cmd: cmd, in: in, out: bufio.NewReader(out)}, nil
}

func (w *worker) expect(line string) error {
	got, err := w.out.ReadString('\n')
	if err != nil {
		return fmt.Errorf("worker: waiting for %q: %w", line, err)
	}
	if strings.TrimSpace(got) != line {
		return fmt.Errorf("worker: said %q, want %q", got, line)
	}
	return nil
}

func (w *worker) kill() {
	_ = w.cmd.Process.Kill()
	_ = w.cmd.Wait()
}

// procPool keeps the worker processes of one table alive across its
// repetitions: starting a process is not what is measured.
type procPool struct {
	mu sync.Mutex
	ws map[string][]*worker // guarded by mu; by subject
}

func (pp *procPool) close() {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	for _, ws := range pp.ws {
		for _, w := range ws {
			w.in.Close()
			_ = w.cmd.Wait()
		}
	}
	pp.ws = nil
}

func (pp *procPool) get(s *subject, dir, prim, key string, p, permits int, dur time.Duration) ([]*worker, error) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if ws, ok := pp.ws[s.name]; ok {
		return ws, nil
	}
	var ws []*worker
	for range p {
		w, err := startWorker(workerArgs{Role: "contend", Prim: prim, Permits: permits, Subject: s.name, Key: key, Dir: dir, Dur: dur})
		if err != nil {
			for _, w := range ws {
				w.kill()
			}
			return nil, err
		}
		ws = append(ws, w)
	}
	for _, w := range ws {
		if err := w.expect("ready"); err != nil {
			for _, w := range ws {
				w.kill()
			}
			return nil, err
		}
	}
	if pp.ws == nil {
		pp.ws = map[string][]*worker{}
	}
	pp.ws[s.name] = ws
	return ws, nil
}

// procContended runs p worker processes on one key of subject s (a Mutex,
// or a Semaphore of permits), each one handle and one goroutine, started
// together.
func procContended(pp *procPool, s *subject, dir, prim, key string, p, permits int, dur time.Duration) (sample, error) {
	ws, err := pp.get(s, dir, prim, key, p, permits, dur)
	if err != nil {
		return sample{}, err
	}
	for _, w := range ws {
		if _, err := io.WriteString(w.in, "go\n"); err != nil {
			return sample{}, err
		}
	}
	res := make([]*loopResult, 0, p)
	var el, cpu time.Duration
	for _, w := range ws {
		var rep workerReport
		line, err := w.out.ReadString('\n')
		if err != nil {
			return sample{}, fmt.Errorf("worker report: %w", err)
		}
		if err := json.Unmarshal([]byte(line), &rep); err != nil {
			return sample{}, fmt.Errorf("worker report: %w", err)
		}
		if rep.Err != "" {
			return sample{}, errors.New(rep.Err)
		}
		res = append(res, &loopResult{ops: rep.Ops, untimed: rep.Untimed, untSec: rep.UntimedSec, cycle: unsparse(rep.Cycle, rep.Max[0]), wait: unsparse(rep.Wait, rep.Max[1])})
		el = max(el, time.Duration(rep.Seconds*float64(time.Second)))
		cpu += time.Duration(rep.CPU)
	}
	return mergeResults(res, el, cpu)
}
