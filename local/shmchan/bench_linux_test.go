//go:build linux

package shmchan

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/locktest"
)

// The benchmarks compare the channel between two processes with a Unix
// domain socket pair, a pair of pipes and a System V message queue, in
// the same run:
//
//	go test -run '^$' -bench . ./local/shmchan
//
// PingPong reports the one-way latency (round trip / 2) at p50 and p99;
// Batch64 the messages per second one process sends another in batches
// of 64.

const envSize = "BATON_SHMCHAN_TEST_SIZE"

// echo copies messages of size bytes from r back to w until r ends.
func echo(r io.Reader, w io.Writer, size int) error {
	buf := make([]byte, size)
	for {
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
}

// streamRole runs the roles over inherited fds: "echo-fd" echoes fd 3 to
// fd 4 (the same socket, or two pipes); "source-fd" writes N messages to
// fd 3 in writes of 64.
func streamRole(role string) error {
	size, _ := strconv.Atoi(os.Getenv(envSize))
	in, out := os.NewFile(3, "in"), os.NewFile(4, "out")
	switch role {
	case "echo-fd":
		return echo(in, out, size)
	case "source-fd":
		n, _ := strconv.Atoi(os.Getenv("BATON_SHMCHAN_TEST_N"))
		buf := make([]byte, 64*size)
		for sent := 0; sent < n; sent += 64 {
			if _, err := in.Write(buf[:min(64, n-sent)*size]); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown role %q", role)
}

// source sends N messages of size bytes on "c" in batches of 64.
func source(c *Chan) error {
	size, _ := strconv.Atoi(os.Getenv(envSize))
	n, _ := strconv.Atoi(os.Getenv("BATON_SHMCHAN_TEST_N"))
	msgs := make([][]byte, 64)
	for i := range msgs {
		msgs[i] = make([]byte, size)
	}
	ctx := context.Background()
	for sent := 0; sent < n; {
		k, err := c.Send(ctx, msgs[:min(64, n-sent)], true)
		if err != nil {
			return err
		}
		sent += k
	}
	return nil
}

// helperCmd returns a helper in role with files as fds 3, 4, ...
func helperCmd(b *testing.B, dir, role string, size, n int, files ...*os.File) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envDir+"="+dir, envSize+"="+strconv.Itoa(size), "BATON_SHMCHAN_TEST_N="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = files
	return cmd
}

// report adds the one-way latency percentiles of round trips rtt.
func report(b *testing.B, rtt []time.Duration) {
	slices.Sort(rtt)
	b.ReportMetric(float64(rtt[len(rtt)/2])/2, "p50-ns")
	b.ReportMetric(float64(rtt[len(rtt)*99/100])/2, "p99-ns")
}

func BenchmarkPingPong(b *testing.B) {
	for _, size := range []int{64, 4096} {
		b.Run(fmt.Sprintf("shmchan/%d", size), func(b *testing.B) { pingShm(b, size, false) })
		b.Run(fmt.Sprintf("shmchan-one/%d", size), func(b *testing.B) { pingShm(b, size, true) })
		b.Run(fmt.Sprintf("unix/%d", size), func(b *testing.B) {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			mine, theirs := os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
			pingFD(b, size, mine, mine, theirs, theirs)
		})
		b.Run(fmt.Sprintf("pipe/%d", size), func(b *testing.B) {
			r1, w1, _ := os.Pipe()
			r2, w2, _ := os.Pipe()
			pingFD(b, size, r2, w1, r1, w2)
		})
		b.Run(fmt.Sprintf("msgq/%d", size), func(b *testing.B) { pingMsgq(b, size) })
	}
}

func pingShm(b *testing.B, size int, one bool) {
	ns, err := ipc.OpenNamespace(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	c := openKind(b, ns, "c", 64, size, one)
	r := openKind(b, ns, "r", 64, size, one)
	cmd := helperCmd(b, ns.Dir(), "pingpong", size, 0)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if _, err := io.ReadFull(out, make([]byte, 6)); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	msg := [][]byte{make([]byte, size)}
	buf := make([]byte, size)
	rtt := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := c.Send(ctx, msg, true); err != nil {
			b.Fatal(err)
		}
		// The answer is read, as a socket's is: its bytes come back
		// across the caches.
		if _, err := r.Recv(ctx, 1, true, func(m []byte) { copy(buf, m) }); err != nil {
			b.Fatal(err)
		}
		rtt = append(rtt, time.Since(t0))
	}
	b.StopTimer()
	report(b, rtt)
}

// pingFD measures round trips over r/w with a helper echoing on hr/hw.
func pingFD(b *testing.B, size int, r, w, hr, hw *os.File) {
	cmd := helperCmd(b, b.TempDir(), "echo-fd", size, 0, hr, hw)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	hr.Close()
	hw.Close()
	defer func() { r.Close(); w.Close(); cmd.Wait() }()
	buf := make([]byte, size)
	rtt := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := w.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(r, buf); err != nil {
			b.Fatal(err)
		}
		rtt = append(rtt, time.Since(t0))
	}
	b.StopTimer()
	report(b, rtt)
}

func BenchmarkBatch64(b *testing.B) {
	for _, size := range []int{48, 64, 4096} {
		b.Run(fmt.Sprintf("shmchan/%d", size), func(b *testing.B) { batchShm(b, size, false) })
		b.Run(fmt.Sprintf("shmchan-one/%d", size), func(b *testing.B) { batchShm(b, size, true) })
		b.Run(fmt.Sprintf("unix/%d", size), func(b *testing.B) {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			mine, theirs := os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
			cmd := helperCmd(b, b.TempDir(), "source-fd", size, b.N, theirs, theirs)
			b.ResetTimer()
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			theirs.Close()
			buf := make([]byte, 64*size)
			for got := 0; got < b.N*size; {
				n, err := mine.Read(buf)
				if err != nil {
					b.Fatal(err)
				}
				got += n
			}
			b.StopTimer()
			mine.Close()
			cmd.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// batchShm counts the messages a source process sends this one in
// batches of 64.
func batchShm(b *testing.B, size int, one bool) {
	ns, err := ipc.OpenNamespace(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	c := openKind(b, ns, "c", 1024, size, one)
	cmd := helperCmd(b, ns.Dir(), "source", size, b.N)
	b.ResetTimer()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	// Each message is read, into a buffer of the batch, as a socket's
	// read would: its bytes come across the caches.
	buf := make([]byte, 64*size)
	for got := 0; got < b.N; {
		at := 0
		n, err := c.Recv(ctx, 64, true, func(m []byte) { at += copy(buf[at:], m) })
		if err != nil {
			b.Fatal(err)
		}
		got += n
	}
	b.StopTimer()
	cmd.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// A receiver blocked on an empty channel costs no CPU: it sleeps on the
// futex word. The receiver is a process of its own, measured from outside
// (its threads' time in /proc), so that this process's own work (the
// runtime, the race detector, other tests) does not count. At most 0.1% of
// a core: 2 ms in 2 s (BATON_LONG=1: 10 s).
func TestBlockedRecvCPU(t *testing.T) {
	ns := testNS(t)
	openTest(t, ns, "c", 4, 16)
	d := 2 * time.Second
	if os.Getenv("BATON_LONG") != "" {
		d = 10 * time.Second
	}
	cmd := start(t, ns, "block", "blocking")
	time.Sleep(100 * time.Millisecond) // past its spin, asleep
	before := cpuTime(t, cmd.Process.Pid)
	time.Sleep(d)
	used := cpuTime(t, cmd.Process.Pid) - before
	t.Logf("a process blocked in Recv used %v of CPU in %v (%.3f%% of a core)", used, d, 100*used.Seconds()/d.Seconds())
	if used > d/1000 {
		t.Errorf("a blocked Recv cost %v of CPU in %v, over 0.1%% of a core", used, d)
	}
}

// cpuTime returns the CPU time process pid has used, all its threads.
func cpuTime(t testing.TB, pid int) time.Duration {
	t.Helper()
	d, err := locktest.CPUTime(pid)
	if err != nil {
		t.Fatalf("CPU time of %d: %v", pid, err)
	}
	return d
}

// BenchmarkFourByFour: 4 sending processes, 4 receivers (a handle each) in
// this one, batches of 64.
func BenchmarkFourByFour(b *testing.B) {
	ns, err := ipc.OpenNamespace(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	const size = 64
	openTest(b, ns, "c", 1024, size)
	var cmds []*exec.Cmd
	b.ResetTimer()
	for i := range 4 {
		cmd := helperCmd(b, ns.Dir(), "source", size, b.N/4+btoi(i < b.N%4))
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	var total atomic.Int64
	reached := make(chan struct{})
	var once sync.Once
	done := make(chan error, 4)
	var hs []*Chan
	for range 4 {
		c := openTest(b, ns, "c", 0, 0)
		hs = append(hs, c)
		go func() {
			for {
				n, err := c.Recv(context.Background(), 64, true, func([]byte) {})
				if total.Add(int64(n)) >= int64(b.N) {
					once.Do(func() { close(reached) })
				}
				if err != nil {
					done <- err
					return
				}
			}
		}()
	}
	<-reached
	b.StopTimer()
	for _, c := range hs {
		c.Interrupt()
	}
	for range 4 {
		if err := <-done; err != baton.ErrClosed {
			b.Fatal(err)
		}
	}
	for _, cmd := range cmds {
		cmd.Wait()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// BenchmarkGoChan is the floor: a Go channel of 64-byte copies between
// two goroutines of one process.
func BenchmarkGoChan(b *testing.B) {
	ch := make(chan [64]byte, 1024)
	go func() {
		var m [64]byte
		for range b.N {
			ch <- m
		}
	}()
	for range b.N {
		<-ch
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// pingMsgq measures round trips over a System V message queue: type 1
// to the helper, type 2 back.
func pingMsgq(b *testing.B, size int) {
	ns, err := ipc.OpenNamespace(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	q, err := ipc.OpenMsgQueue(ns, "q", size)
	if err != nil {
		b.Skip(err)
	}
	defer ipc.RemoveMsgQueue(ns, "q")
	defer q.Close()
	cmd := helperCmd(b, ns.Dir(), "pingpong-msgq", size, 0)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	ctx := context.Background()
	msg := make([]byte, size)
	rtt := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if err := q.Send(ctx, 1, msg); err != nil {
			b.Fatal(err)
		}
		if _, err := q.Receive(ctx, 2); err != nil {
			b.Fatal(err)
		}
		rtt = append(rtt, time.Since(t0))
	}
	b.StopTimer()
	report(b, rtt)
}

// pongMsgq echoes messages of type 1 of the queue "q" as type 2.
func pongMsgq(dir string) error {
	ns, err := ipc.OpenNamespace(dir)
	if err != nil {
		return err
	}
	size, _ := strconv.Atoi(os.Getenv(envSize))
	q, err := ipc.OpenMsgQueue(ns, "q", size)
	if err != nil {
		return err
	}
	ctx := context.Background()
	for {
		m, err := q.Receive(ctx, 1)
		if err != nil {
			return err
		}
		if err := q.Send(ctx, 2, m.Body); err != nil {
			return err
		}
	}
}
