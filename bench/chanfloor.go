//go:build linux

package main

import (
	"runtime"
	"sync/atomic"
	"time"
)

// The floors of the channel tables: what this machine's caches allow
// between two threads that share memory and spin, with nothing else — no
// slot states, no other sender or receiver to exclude, no message
// boundaries, no waking anyone. No channel between processes can do
// better; a goal below a floor cannot be met on the machine at hand.

// onThread runs fn in a goroutine on a thread of its own (the other end
// spins on the caller's); wait returns once fn has.
func onThread(fn func()) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		fn()
	}()
	return func() { <-done }
}

// floorBox is one direction of the ping-pong floor: a sequence number and
// a message, on lines of their own.
type floorBox struct {
	seq  atomic.Uint64
	_    [56]byte
	data [4096]byte
}

// floorPingPong times round trips of size bytes between two threads that
// spin on a sequence number, each copying the message in and out as the
// channel's ends do, and reports half of each.
func floorPingPong(size int, dur time.Duration) sample {
	var there, back floorBox
	var stop atomic.Bool
	wait := onThread(func() {
		buf := make([]byte, size)
		for i := uint64(1); ; i++ {
			for there.seq.Load() != i {
				if stop.Load() {
					return
				}
			}
			copy(buf, there.data[:size])
			copy(back.data[:size], buf)
			back.seq.Store(i)
		}
	})
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	msg, buf := make([]byte, size), make([]byte, size)
	var h hist
	n := 0
	start := time.Now()
	for i := uint64(1); time.Since(start) < dur; i++ {
		t0 := time.Now()
		copy(there.data[:size], msg)
		there.seq.Store(i)
		for back.seq.Load() != i {
		}
		copy(buf, back.data[:size])
		h.add(time.Since(t0) / 2)
		n++
	}
	el := time.Since(start)
	stop.Store(true)
	wait()
	return sample{Ops: int64(n), Seconds: el.Seconds(), Throughput: float64(n) / el.Seconds(),
		P50: h.quantile(0.5), P99: h.quantile(0.99), Max: h.max}
}

// floorRing is a ring of 1024 messages of 64 bytes for one writer and one
// reader that publish with one store per batch.
type floorRing struct {
	head atomic.Uint64 // messages written
	_    [56]byte
	tail atomic.Uint64 // messages read
	_    [56]byte
	data [1024 * 64]byte
}

// floorBatches counts the 64-byte messages one thread gets through to
// another in dur, written and read 64 at a time with a copy each way.
func floorBatches(dur time.Duration) sample {
	const slots, size, batch = 1024, 64, 64
	r := new(floorRing)
	var stop atomic.Bool
	wait := onThread(func() {
		msgs := make([]byte, batch*size)
		for sent := uint64(0); !stop.Load(); {
			if sent-r.tail.Load() > slots-batch {
				continue // no room for a batch yet
			}
			p := sent % slots
			copy(r.data[p*size:(p+batch)*size], msgs)
			sent += batch
			r.head.Store(sent)
		}
	})
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	buf := make([]byte, batch*size)
	got := uint64(0)
	start := time.Now()
	for time.Since(start) < dur {
		for k := 0; k < 1024; k++ {
			h := r.head.Load()
			if h == got {
				continue
			}
			p := got % slots
			n := min(h-got, batch, slots-p)
			copy(buf, r.data[p*size:(p+n)*size])
			got += n
			r.tail.Store(got)
		}
	}
	el := time.Since(start)
	stop.Store(true)
	wait()
	return perMessage(int(got), el)
}
