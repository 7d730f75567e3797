//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

// More channel tables: 4 sending processes × 4 receivers, the Go channel
// of one process as the floor, and the CPU of a receiver blocked on an
// empty channel.

// perMessage is the sample of n messages in el: the throughput, and the
// time per message as p50 (a goal of messages per second is one of time
// per message).
func perMessage(n int, el time.Duration) sample {
	s := sample{Ops: int64(n), Seconds: el.Seconds(), Throughput: float64(n) / el.Seconds()}
	if n > 0 {
		s.P50 = int64(el) / int64(n)
		s.P99, s.Max = s.P50, s.P50
	}
	return s
}

// goChanRun counts the 64-byte values k goroutines send k others over a
// buffered Go channel in dur.
func goChanRun(k int, dur time.Duration) sample {
	ch := make(chan [64]byte, 1024)
	var stop atomic.Bool
	var senders, receivers sync.WaitGroup
	var total atomic.Int64
	for range k {
		senders.Go(func() {
			var m [64]byte
			for !stop.Load() {
				ch <- m
			}
		})
		receivers.Go(func() {
			n := 0
			for range ch {
				n++
			}
			total.Add(int64(n))
		})
	}
	start := time.Now()
	time.Sleep(dur)
	stop.Store(true)
	el := time.Since(start)
	senders.Wait()
	close(ch)
	receivers.Wait()
	return perMessage(int(total.Load()), el)
}

// chanFourByFour counts the 64-byte messages 4 source processes send in
// batches of 64 to 4 receivers (a handle each) of this process in dur.
func chanFourByFour(ctx context.Context, base string, dur time.Duration) (sample, error) {
	dir, err := os.MkdirTemp(base, "chan-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	b, err := local.Open(dir)
	if err != nil {
		return sample{}, err
	}
	defer b.Close()
	o := baton.ChannelOptions{Capacity: 1024, MaxMessage: 64}
	var hs []baton.Channel
	for range 4 {
		c, err := b.Channel(ctx, "c", o)
		if err != nil {
			return sample{}, err
		}
		hs = append(hs, c)
	}
	var cmds []*exec.Cmd
	defer func() {
		for _, cmd := range cmds {
			stopChanPeer(cmd)
		}
	}()
	for range 4 {
		cmd, err := chanPeer("source", "baton", 64, dir)
		if err != nil {
			return sample{}, err
		}
		cmds = append(cmds, cmd)
	}
	// Wait for the first message before the clock starts: the sources
	// are processes that start up.
	first, err := hs[0].RecvBatch(ctx, 64)
	if err != nil {
		return sample{}, err
	}
	_ = first
	rctx, cancel := context.WithCancel(ctx)
	var total atomic.Int64
	errs := make(chan error, len(hs))
	start := time.Now()
	for _, c := range hs {
		go func() {
			for {
				msgs, err := c.RecvBatch(rctx, 64)
				total.Add(int64(len(msgs)))
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	time.Sleep(dur)
	n := total.Load()
	el := time.Since(start)
	cancel()
	for range hs {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			return sample{}, err
		}
	}
	return perMessage(int(n), el), nil
}

// chanIdle measures the CPU a peer of transport uses per second while it
// is blocked receiving from an empty channel (its echo role, to which
// nothing is sent), over window.
func chanIdle(ctx context.Context, transport, base string, window time.Duration) (sample, error) {
	t, err := openChanTransport(ctx, transport, "echo", 64, base)
	if err != nil {
		return sample{}, err
	}
	defer t.close()
	// One round trip: the peer has started and is in its receive loop.
	buf := make([]byte, 64)
	if err := t.send(buf); err != nil {
		return sample{}, err
	}
	if err := t.recv(buf); err != nil {
		return sample{}, err
	}
	time.Sleep(200 * time.Millisecond) // asleep in its next receive
	before := taskCPU(t.pid)
	t0 := time.Now()
	time.Sleep(window)
	el := time.Since(t0)
	if err := syscall.Kill(t.pid, 0); err != nil {
		return sample{}, fmt.Errorf("the receiving process ended: %w", err)
	}
	perSec := int64(float64(taskCPU(t.pid)-before) / el.Seconds())
	return sample{Ops: 1, Seconds: el.Seconds(), P50: perSec, P99: perSec, Max: perSec}, nil
}

// chanMoreTables are the tables above, after chanTables' own.
func chanMoreTables(cfg config, dir string, batonSub, goChan *subject) []*plannedTable {
	const sec = "Same host"
	four := newPlanned("chan-4x4", sec, "Channel, 64 B messages 4 processes send in batches of 64 to 4 receivers (p50: time per message)", "throughput", "",
		[]string{goChan.name}, []*subject{batonSub, goChan},
		func(ctx context.Context, s *subject) (sample, error) {
			if s.id == "go" {
				return goChanRun(4, cfg.dur), nil
			}
			return chanFourByFour(ctx, dir, cfg.dur)
		})
	unix := &subject{name: "Unix socket pair", id: "unix", kind: "same-host"}
	idle := newPlanned("idle-chan", sec, "Channel, a process receiving from an empty channel: CPU per second of waiting", "latency", "",
		nil, []*subject{batonSub, unix},
		func(ctx context.Context, s *subject) (sample, error) { return chanIdle(ctx, s.id, dir, cfg.idleWindow) })
	return []*plannedTable{four, idle}
}
