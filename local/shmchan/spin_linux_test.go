//go:build linux

package shmchan

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonlock/baton/internal/word"
)

// A side spins long until failStreak spins in a row run out, then short
// but for a long probe every probeEvery-th wait, and long again once a
// spin ends with the slot changed.
func TestSpinAdapts(t *testing.T) {
	var s spinner
	var st word.Uint64
	for i := range failStreak {
		if s.fails.Load() != int64(i) {
			t.Fatalf("%d fails counted after %d spins that ran out", s.fails.Load(), i)
		}
		t0 := time.Now()
		if s.spin(&st, 0) {
			t.Fatal("a spin on a word nobody changes reported a change")
		}
		if el := time.Since(t0); el < spinLong {
			t.Fatalf("spin %d of a fresh side lasted %v, less than %v", i, el, spinLong)
		}
	}
	probes := 0
	for range 4 * probeEvery {
		switch s.next() {
		case spinProbe:
			probes++
		case spinShort:
		default:
			t.Fatal("after the streak a wait spins neither short nor as a probe")
		}
	}
	if probes != 4 {
		t.Errorf("after the streak %d of %d waits probe, want 4", probes, 4*probeEvery)
	}
	st.Store(1)
	if !s.spin(&st, 0) {
		t.Fatal("a spin on a changed word reported none")
	}
	if s.next() != spinLong {
		t.Error("a spin that ended well leaves the side spinning short")
	}
}

// A batch walks on from its own last slot and moves tail and head once;
// a position word left behind (a process killed mid-batch leaves it so)
// is walked over: nothing is lost, duplicated or reordered.
func TestBatchWalk(t *testing.T) {
	c := openTest(t, testNS(t), "c", 16, 16)
	ctx := context.Background()
	msgs := func(from, n int) [][]byte {
		var m [][]byte
		for i := range n {
			m = append(m, []byte(fmt.Sprint(from+i)))
		}
		return m
	}
	next := 0
	recv := func(max int) {
		t.Helper()
		_, err := c.Recv(ctx, max, false, func(m []byte) {
			if string(m) != fmt.Sprint(next) {
				t.Fatalf("got %q, want %d\n%s", m, next, c.dump())
			}
			next++
		})
		if err != nil {
			t.Fatalf("recv: %v\n%s", err, c.dump())
		}
	}
	if n, err := c.Send(ctx, msgs(0, 10), false); n != 10 || err != nil {
		t.Fatalf("sent %d: %v", n, err)
	}
	if tail := c.u64(offTail).Load(); tail != 10 {
		t.Errorf("tail %d after a batch of 10, want 10", tail)
	}
	c.u64(offTail).Store(2) // left behind
	if n, err := c.Send(ctx, msgs(10, 6), false); n != 6 || err != nil {
		t.Fatalf("sent %d after the tail was left behind: %v\n%s", n, err, c.dump())
	}
	recv(8)
	if head := c.u64(offHead).Load(); head != 8 {
		t.Errorf("head %d after a batch of 8, want 8", head)
	}
	c.u64(offHead).Store(3) // left behind
	recv(16)
	if next != 16 {
		t.Fatalf("received %d messages, want 16\n%s", next, c.dump())
	}
	// The ring is whole: another lap of batches goes through.
	if n, err := c.Send(ctx, msgs(16, 16), false); n != 16 || err != nil {
		t.Fatalf("sent %d on the next lap: %v\n%s", n, err, c.dump())
	}
	recv(16)
	if next != 32 {
		t.Fatalf("received %d messages, want 32\n%s", next, c.dump())
	}
}
