//go:build linux

package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/local"
)

// Same-host queue tables: jobs of 64 B put by this process and claimed and
// acknowledged by claimant processes (this binary re-executed with
// queueEnv set, run by init before main), through baton's local Queue
// beside a System V message queue sent and received the same way.
//
// A claimant reports every 64 jobs it finished by one byte on a pipe (its
// fd 3); the producer keeps at most queueWindow jobs unreported, so that
// the queue never fills (its capacity is 4096) yet holds the claimants'
// work for the few milliseconds a loaded machine may take to schedule the
// producer again, and the throughput is the jobs reported in the run. Claimants keep their partial counts across runs: in a steady flow
// the lag at the start of a run and at its end are alike.

const (
	queueEnv    = "BATON_BENCH_QUEUE" // role transport dir
	queueJob    = 64                  // payload bytes
	queueCredit = 64                  // jobs per byte of the report pipe
	queueWindow = 3072                // jobs put and not yet reported, at most
)

func init() {
	spec := os.Getenv(queueEnv)
	if spec == "" {
		return
	}
	var role, transport, dir string
	if _, err := fmt.Sscanf(spec, "%s %s %s", &role, &transport, &dir); err != nil {
		fmt.Fprintln(os.Stderr, "queue worker:", err)
		os.Exit(2)
	}
	if err := queueWorker(role, transport, dir, os.NewFile(3, "report")); err != nil {
		fmt.Fprintln(os.Stderr, "queue worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// monoNow reads CLOCK_MONOTONIC, which every process of the host shares:
// a job carries the time it was put in its first 8 bytes.
func monoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// queueEnd is one side of a transport: put a job, or take one and finish
// it (Claim and Ack; a receive), returning its payload.
type queueEnd struct {
	put   func(msg []byte) error
	take  func() ([]byte, error)
	close func()
}

// openQueueEnd opens transport ("baton" or "msgq") in dir.
func openQueueEnd(ctx context.Context, transport, dir string) (*queueEnd, error) {
	switch transport {
	case "baton":
		b, err := local.Open(dir)
		if err != nil {
			return nil, err
		}
		q, err := b.Queue(ctx, "q")
		if err != nil {
			b.Close()
			return nil, err
		}
		return &queueEnd{
			put: func(msg []byte) error { _, err := q.Put(ctx, msg); return err },
			take: func() ([]byte, error) {
				j, err := q.Claim(ctx)
				if err != nil {
					return nil, err
				}
				return j.Payload(), j.Ack(ctx)
			},
			close: func() { q.Close(); b.Close() },
		}, nil
	case "msgq":
		ns, err := ipc.OpenNamespace(dir)
		if err != nil {
			return nil, err
		}
		q, err := ipc.OpenMsgQueue(ns, "q", queueJob)
		if err != nil {
			return nil, err
		}
		return &queueEnd{
			put: func(msg []byte) error { return q.Send(ctx, 1, msg) },
			take: func() ([]byte, error) {
				m, err := q.Receive(ctx, 1)
				return m.Body, err
			},
			close: func() { q.Close(); ipc.RemoveMsgQueue(ns, "q") },
		}, nil
	case "futex":
		return openFutexEnd(dir)
	}
	return nil, fmt.Errorf("no queue transport %q", transport)
}

// openFutexEnd is the floor of the latency table: a word in a shared
// mapping that the producer bumps and wakes, and the claimant sleeps on
// with a futex wait, with the job beside it; nothing else. It carries one
// job at a time (the latency run waits for each report).
func openFutexEnd(dir string) (*queueEnd, error) {
	f, err := os.OpenFile(filepath.Join(dir, "futex"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := f.Truncate(4096); err != nil {
		return nil, err
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	seq := (*atomic.Uint32)(unsafe.Pointer(&mem[0]))
	word := (*uint32)(unsafe.Pointer(&mem[0]))
	job := mem[64 : 64+queueJob]
	var seen uint32 // the file is new: a claimant that starts late still finds the first job
	return &queueEnd{
		put: func(msg []byte) error {
			copy(job, msg)
			seq.Add(1)
			_, err := ipc.FutexWake(word, 1)
			return err
		},
		take: func() ([]byte, error) {
			for {
				if cur := seq.Load(); cur != seen {
					seen = cur
					return slices.Clone(job), nil
				}
				if _, err := ipc.FutexWait(word, seen, -1); err != nil {
					return nil, err
				}
			}
		},
		close: func() { _ = unix.Munmap(mem) },
	}, nil
}

// queueWorker is a claimant process. Role "claim" reports every
// queueCredit jobs by a byte on report; "latency" writes, for each job,
// the nanoseconds from its put to its claim; "idle" writes one byte and
// waits for a job that never comes.
func queueWorker(role, transport, dir string, report *os.File) error {
	e, err := openQueueEnd(context.Background(), transport, dir)
	if err != nil {
		return err
	}
	switch role {
	case "idle":
		if _, err := report.Write([]byte{1}); err != nil {
			return err
		}
		_, err := e.take()
		return err
	case "latency":
		var b [8]byte
		for {
			p, err := e.take()
			if err != nil {
				return err
			}
			lat := monoNow() - int64(binary.NativeEndian.Uint64(p))
			binary.NativeEndian.PutUint64(b[:], uint64(lat))
			if _, err := report.Write(b[:]); err != nil {
				return err
			}
		}
	case "claim":
		for n := 1; ; n++ {
			if _, err := e.take(); err != nil {
				return err
			}
			if n%queueCredit == 0 {
				if _, err := report.Write([]byte{1}); err != nil {
					return err
				}
			}
		}
	}
	return fmt.Errorf("no queue role %q", role)
}

// queueRig is a producer (this process) and k claimant processes on one
// transport in a directory of their own.
type queueRig struct {
	end    *queueEnd
	dir    string
	cmds   []*exec.Cmd
	report *os.File // read end of the claimants' pipe
	// unreported counts jobs put and not yet reported done.
	unreported int
}

func startQueueRig(ctx context.Context, transport, role string, k int, base string) (*queueRig, error) {
	dir, err := os.MkdirTemp(base, "queue-")
	if err != nil {
		return nil, err
	}
	e, err := openQueueEnd(ctx, transport, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	rig := &queueRig{end: e, dir: dir}
	r, w, err := os.Pipe()
	if err != nil {
		rig.close()
		return nil, err
	}
	rig.report = r
	defer w.Close()
	for range k {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), queueEnv+"="+fmt.Sprintf("%s %s %s", role, transport, dir))
		cmd.Stderr = os.Stderr
		cmd.ExtraFiles = []*os.File{w}
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			rig.close()
			return nil, err
		}
		rig.cmds = append(rig.cmds, cmd)
	}
	return rig, nil
}

func (rig *queueRig) close() {
	for _, cmd := range rig.cmds {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	if rig.report != nil {
		rig.report.Close()
	}
	rig.end.close()
	os.RemoveAll(rig.dir)
}

// cpu is the CPU time the claimant processes have used so far.
func (rig *queueRig) cpu() time.Duration {
	var d time.Duration
	for _, cmd := range rig.cmds {
		d += taskCPU(cmd.Process.Pid)
	}
	return d
}

// flow puts jobs for dur, never more than queueWindow ahead of the
// claimants' reports, and returns the jobs reported done meanwhile.
func (rig *queueRig) flow(dur time.Duration) (sample, error) {
	msg := make([]byte, queueJob)
	buf := make([]byte, 4096)
	var done int64
	c0, w0 := cpuNow(nil), rig.cpu()
	t0 := time.Now()
	for time.Since(t0) < dur {
		for rig.unreported < queueWindow {
			if err := rig.end.put(msg); err != nil {
				return sample{}, err
			}
			rig.unreported++
		}
		n, err := rig.report.Read(buf)
		if err != nil {
			return sample{}, fmt.Errorf("claimants' reports: %w", err)
		}
		rig.unreported -= n * queueCredit
		done += int64(n * queueCredit)
	}
	el := time.Since(t0)
	cpu := cpuNow(nil) - c0 + rig.cpu() - w0
	return sample{Ops: done, Seconds: el.Seconds(), Throughput: float64(done) / el.Seconds(), CPUPerOp: int64(cpu) / max(done, 1)}, nil
}

// latency puts one job at a time to a claimant blocked in Claim (given
// settle to fall asleep) and records the time from the Put call to the
// claim, as the claimant saw it.
func (rig *queueRig) latency(dur, settle time.Duration) (sample, error) {
	msg := make([]byte, queueJob)
	var b [8]byte
	var h hist
	n := 0
	t0 := time.Now()
	for time.Since(t0) < dur || n < 3 {
		time.Sleep(settle)
		binary.NativeEndian.PutUint64(msg, uint64(monoNow()))
		if err := rig.end.put(msg); err != nil {
			return sample{}, err
		}
		if _, err := io.ReadFull(rig.report, b[:]); err != nil {
			return sample{}, fmt.Errorf("claimant's report: %w", err)
		}
		h.add(time.Duration(binary.NativeEndian.Uint64(b[:])))
		n++
	}
	return sample{Ops: int64(n), P50: h.quantile(0.5), P99: h.quantile(0.99), Max: h.max, WorstWait: h.max}, nil
}

// idle starts k claimants of an empty queue and returns their CPU per
// second of waiting over window: p50 of the claimants, p99 the worst.
func queueIdle(ctx context.Context, transport string, k int, base string, window time.Duration) (sample, error) {
	rig, err := startQueueRig(ctx, transport, "idle", k, base)
	if err != nil {
		return sample{}, err
	}
	defer rig.close()
	if _, err := io.ReadFull(rig.report, make([]byte, k)); err != nil {
		return sample{}, fmt.Errorf("claimants: %w", err)
	}
	time.Sleep(200 * time.Millisecond) // every claimant asleep
	before := make([]time.Duration, k)
	for i, cmd := range rig.cmds {
		before[i] = taskCPU(cmd.Process.Pid)
	}
	t0 := time.Now()
	time.Sleep(window)
	el := time.Since(t0)
	perSec := make([]int64, k)
	for i, cmd := range rig.cmds {
		perSec[i] = int64(float64(taskCPU(cmd.Process.Pid)-before[i]) / el.Seconds())
	}
	slices.Sort(perSec)
	return sample{Ops: int64(k), Seconds: el.Seconds(), P50: perSec[k/2], P99: perSec[(k*99+99)/100-1], Max: perSec[k-1]}, nil
}

// rigPool keeps the claimant processes of a table alive across its
// repetitions, one rig per subject: starting processes is not measured.
type rigPool struct {
	mu   sync.Mutex
	rigs map[string]*queueRig // guarded by mu; by subject
}

func (p *rigPool) get(s *subject, role string, k int, base string) (*queueRig, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if rig, ok := p.rigs[s.name]; ok {
		return rig, nil
	}
	// The rig outlives the run that starts it, and so its context.
	rig, err := startQueueRig(context.Background(), s.id, role, k, base)
	if err != nil {
		return nil, err
	}
	if p.rigs == nil {
		p.rigs = map[string]*queueRig{}
	}
	p.rigs[s.name] = rig
	return rig, nil
}

func (p *rigPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, rig := range p.rigs {
		rig.close()
	}
	p.rigs = nil
}

// queueLocalTables are the queue tables of the same-host section.
func queueLocalTables(cfg config, dir string) []*plannedTable {
	const sec = "Same host"
	const msgq = "System V msgq"
	subs := []*subject{
		{name: "baton local queue", id: "baton", baton: true, kind: "same-host", proc: true},
		{name: msgq, id: "msgq", kind: "same-host", proc: true},
	}
	var ts []*plannedTable
	for _, k := range []int{1, 4} {
		pool := &rigPool{}
		t := newPlanned(fmt.Sprintf("queue-c%d", k), sec,
			fmt.Sprintf("Queue, Put+Claim+Ack of %d B jobs, a producer process and %d claimant process(es) (msgq: send+receive)", queueJob, k),
			"throughput", "", []string{msgq}, subs,
			func(ctx context.Context, s *subject) (sample, error) {
				rig, err := pool.get(s, "claim", k, dir)
				if err != nil {
					return sample{}, err
				}
				return rig.flow(cfg.dur)
			})
		t.done = pool.close
		ts = append(ts, t)
	}
	pool := &rigPool{}
	// The floor: the wake-up of a process asleep in a futex wait.
	floor := &subject{name: "futex wake (floor)", id: "futex", kind: "same-host", proc: true}
	t := newPlanned("queue-latency", sec, "Queue, a Put to a claimant process blocked in Claim: put to claim (msgq: send to receive; floor: a futex wake to the woken process's first instruction)",
		"latency", "", []string{msgq}, append(subs[:2:2], floor),
		func(ctx context.Context, s *subject) (sample, error) {
			rig, err := pool.get(s, "latency", 1, dir)
			if err != nil {
				return sample{}, err
			}
			return rig.latency(cfg.dur, 200*time.Microsecond)
		})
	t.done = pool.close
	ts = append(ts, t)
	ts = append(ts, newPlanned("idle-queue", sec, "Queue, 4 claimant processes blocked on an empty queue: CPU per second of waiting (p50 of the claimants, p99 the worst)",
		"latency", "", nil, subs,
		func(ctx context.Context, s *subject) (sample, error) {
			return queueIdle(ctx, s.id, 4, dir, cfg.idleWindow)
		}))
	return ts
}
