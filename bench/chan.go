//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/local"
)

// Channel tables: a message between two processes through baton's
// same-host Channel, beside a Unix socket pair, a pair of pipes and a
// System V message queue. The far end is this binary re-executed with
// chanEnv set (an echo or a source), which init runs before main.

const chanEnv = "BATON_BENCH_CHAN" // role,transport,size,dir

func init() {
	spec := os.Getenv(chanEnv)
	if spec == "" {
		return
	}
	var role, transport, dir string
	var size int
	if _, err := fmt.Sscanf(spec, "%s %s %d %s", &role, &transport, &size, &dir); err != nil {
		fmt.Fprintln(os.Stderr, "chan worker:", err)
		os.Exit(2)
	}
	if err := chanWorker(role, transport, size, dir); err != nil {
		fmt.Fprintln(os.Stderr, "chan worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// chanWorker echoes messages (role "echo") or sends them for ever in
// batches of 64 (role "source") over transport; fds 3 and 4 are the
// stream ends.
func chanWorker(role, transport string, size int, dir string) error {
	ctx := context.Background()
	in, out := os.NewFile(3, "in"), os.NewFile(4, "out")
	buf := make([]byte, 64*size)
	switch transport {
	case "baton", "baton1":
		b, err := local.Open(dir)
		if err != nil {
			return err
		}
		defer b.Close()
		c, err := b.Channel(ctx, "c", baton.ChannelOptions{})
		if err != nil {
			return err
		}
		r, err := b.Channel(ctx, "r", baton.ChannelOptions{})
		if err != nil {
			return err
		}
		if role == "source" {
			msgs := make([][]byte, 64)
			for i := range msgs {
				msgs[i] = buf[i*size : (i+1)*size]
			}
			for {
				for sent := 0; sent < 64; {
					n, err := c.SendBatch(ctx, msgs[sent:])
					if err != nil {
						return err
					}
					sent += n
				}
			}
		}
		for {
			n, err := c.RecvInto(ctx, buf)
			if err != nil {
				return err
			}
			if err := r.Send(ctx, buf[:n]); err != nil {
				return err
			}
		}
	case "msgq":
		ns, err := ipc.OpenNamespace(dir)
		if err != nil {
			return err
		}
		q, err := ipc.OpenMsgQueue(ns, "q", size)
		if err != nil {
			return err
		}
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
	if role == "source" {
		for {
			if _, err := in.Write(buf); err != nil {
				return nil
			}
		}
	}
	msg := buf[:size]
	for {
		if _, err := io.ReadFull(in, msg); err != nil {
			return nil
		}
		if _, err := out.Write(msg); err != nil {
			return err
		}
	}
}

// chanPeer starts the far end of transport in role; files become fds 3, 4.
func chanPeer(role, transport string, size int, dir string, files ...*os.File) (*exec.Cmd, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), chanEnv+"="+fmt.Sprintf("%s %s %d %s", role, transport, size, dir))
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = files
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	for _, f := range files {
		f.Close()
	}
	return cmd, nil
}

func stopChanPeer(cmd *exec.Cmd) {
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// chanTransport is one way of moving a message to another process: send
// and recv of one message, or of up to 64 (recvMany returns how many).
type chanTransport struct {
	send     func(msg []byte) error
	recv     func(buf []byte) error
	recvMany func(buf []byte) (int, error)
	close    func()
	pid      int // the peer process
}

// openChanTransport opens transport to a peer in role, in a fresh directory.
func openChanTransport(ctx context.Context, transport, role string, size int, base string) (*chanTransport, error) {
	dir, err := os.MkdirTemp(base, "chan-")
	if err != nil {
		return nil, err
	}
	switch transport {
	case "baton", "baton1": // baton1: one-to-one channels
		b, err := local.Open(dir)
		if err != nil {
			return nil, err
		}
		o := baton.ChannelOptions{Capacity: 1024, MaxMessage: size, OneToOne: transport == "baton1"}
		c, err1 := b.Channel(ctx, "c", o)
		r, err2 := b.Channel(ctx, "r", o)
		if err1 != nil || err2 != nil {
			b.Close()
			return nil, fmt.Errorf("%w %w", err1, err2)
		}
		cmd, err := chanPeer(role, transport, size, dir)
		if err != nil {
			b.Close()
			return nil, err
		}
		return &chanTransport{
			send: func(msg []byte) error { return c.Send(ctx, msg) },
			recv: func(buf []byte) error { _, err := r.RecvInto(ctx, buf); return err },
			// Into the caller's buffer, as a socket's read: RecvFunc
			// hands each message in place and the copy is the caller's.
			recvMany: func(buf []byte) (int, error) {
				at := 0
				return c.RecvFunc(ctx, 64, func(m []byte) { at += copy(buf[at:], m) })
			},
			close: func() { stopChanPeer(cmd); b.Close(); os.RemoveAll(dir) },
			pid:   cmd.Process.Pid,
		}, nil
	case "msgq":
		ns, err := ipc.OpenNamespace(dir)
		if err != nil {
			return nil, err
		}
		q, err := ipc.OpenMsgQueue(ns, "q", size)
		if err != nil {
			return nil, err
		}
		cmd, err := chanPeer(role, transport, size, dir)
		if err != nil {
			ipc.RemoveMsgQueue(ns, "q")
			return nil, err
		}
		return &chanTransport{
			send:  func(msg []byte) error { return q.Send(ctx, 1, msg) },
			recv:  func([]byte) error { _, err := q.Receive(ctx, 2); return err },
			close: func() { stopChanPeer(cmd); q.Close(); ipc.RemoveMsgQueue(ns, "q"); os.RemoveAll(dir) },
			pid:   cmd.Process.Pid,
		}, nil
	}
	var mineR, mineW, theirR, theirW *os.File
	if transport == "unix" {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		mineR = os.NewFile(uintptr(fds[0]), "mine")
		mineW, theirR = mineR, os.NewFile(uintptr(fds[1]), "theirs")
		theirW = theirR
	} else {
		r1, w1, _ := os.Pipe()
		r2, w2, _ := os.Pipe()
		mineR, mineW, theirR, theirW = r2, w1, r1, w2
	}
	files := []*os.File{theirR, theirW}
	if theirR == theirW {
		files = []*os.File{theirR, theirR}
	}
	if role == "source" { // the source writes on its fd 3
		files = []*os.File{theirW, theirW}
		if theirR != theirW {
			theirR.Close()
		}
	}
	cmd, err := chanPeer(role, transport, size, dir, files...)
	if err != nil {
		return nil, err
	}
	return &chanTransport{
		send:     func(msg []byte) error { _, err := mineW.Write(msg); return err },
		recv:     func(buf []byte) error { _, err := io.ReadFull(mineR, buf); return err },
		recvMany: func(buf []byte) (int, error) { n, err := io.ReadFull(mineR, buf); return n / size, err },
		close:    func() { mineR.Close(); mineW.Close(); stopChanPeer(cmd); os.RemoveAll(dir) },
		pid:      cmd.Process.Pid,
	}, nil
}

// chanPingPong times round trips for dur and reports half of each: the
// one-way latency.
func chanPingPong(ctx context.Context, transport string, size int, dir string, dur time.Duration) (sample, error) {
	t, err := openChanTransport(ctx, transport, "echo", size, dir)
	if err != nil {
		return sample{}, err
	}
	defer t.close()
	msg, buf := make([]byte, size), make([]byte, size)
	var h hist
	n := 0
	start := time.Now()
	for time.Since(start) < dur {
		t0 := time.Now()
		if err := t.send(msg); err != nil {
			return sample{}, err
		}
		if err := t.recv(buf); err != nil {
			return sample{}, err
		}
		h.add(time.Since(t0) / 2)
		n++
	}
	el := time.Since(start)
	return sample{Ops: int64(n), Seconds: el.Seconds(), Throughput: float64(n) / el.Seconds(),
		P50: h.quantile(0.5), P99: h.quantile(0.99), Max: h.max}, nil
}

// chanBatches counts the messages a source process gets through in dur,
// received up to 64 at a time.
func chanBatches(ctx context.Context, transport string, size int, dir string, dur time.Duration) (sample, error) {
	t, err := openChanTransport(ctx, transport, "source", size, dir)
	if err != nil {
		return sample{}, err
	}
	defer t.close()
	buf := make([]byte, 64*size)
	n := 0
	start := time.Now()
	for time.Since(start) < dur {
		k, err := t.recvMany(buf)
		if err != nil {
			return sample{}, err
		}
		n += k
	}
	return perMessage(n, time.Since(start)), nil
}

// chanTables are the channel tables of the same-host section.
func chanTables(cfg config, dir string) []*plannedTable {
	const sec = "Same host"
	subs := map[string]*subject{}
	mk := func(transport, name string, isBaton bool) *subject {
		s := &subject{name: name, id: transport, baton: isBaton, kind: "same-host"}
		subs[name] = s
		return s
	}
	all := []*subject{mk("baton", "baton local channel", true), mk("unix", "Unix socket pair", false),
		mk("pipe", "pipe pair", false), mk("msgq", "System V msgq", false)}
	one := mk("baton1", "baton local channel, one-to-one", true)
	// The floor: two threads of one process that share memory and spin
	// (chanfloor.go), the machine's limit for any channel.
	floor := mk("floor", "bare shared memory (floor)", false)
	var ts []*plannedTable
	for _, size := range []int{64, 4096} {
		ts = append(ts, newPlanned("chan-pingpong-"+strconv.Itoa(size), sec,
			fmt.Sprintf("Channel, one-way latency of %d B between two processes (ping-pong / 2)", size), "latency", "",
			[]string{"Unix socket pair", "pipe pair", "System V msgq"}, append(all[:4:4], one, floor),
			func(ctx context.Context, s *subject) (sample, error) {
				if s.id == "floor" {
					return floorPingPong(size, cfg.dur), nil
				}
				return chanPingPong(ctx, s.id, size, dir, cfg.dur)
			}))
	}
	goChan := mk("go", "Go channel (in process)", false)
	ts = append(ts, newPlanned("chan-batch64", sec, "Channel, 64 B messages one process sends another in batches of 64, taken in place (RecvFunc) into the receiver's buffer (p50: time per message)", "throughput", "",
		[]string{"Unix socket pair"}, append(all[:2:2], one, goChan, floor),
		func(ctx context.Context, s *subject) (sample, error) {
			switch s.id {
			case "go":
				return goChanRun(1, cfg.dur), nil
			case "floor":
				return floorBatches(cfg.dur), nil
			}
			return chanBatches(ctx, s.id, 64, dir, cfg.dur)
		}))
	return append(ts, chanMoreTables(cfg, dir, all[0], goChan)...)
}
