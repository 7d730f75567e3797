package locktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// Tests of baton.Value, run when Caps.Value is set; a backend without it
// must refuse Backend.Value with ErrUnsupported. The cross-process and
// SIGKILL tests are in value_proc.go.

func testValue(t *testing.T, e *env) {
	if !e.s.Caps.Value {
		b, ctx, name := e.start(t)
		_, err := b.Value(ctx, name)
		is(t, "Value of a backend without values", err, baton.ErrUnsupported)
		return
	}
	e.run(t, []subtest{
		{"Basics", testValueBasics, true},
		{"BadInput", testValueBadInput, true},
		{"Counter", testValueCounter, true},
		{"Wait", testValueWait, true},
		{"Close", testValueClose, true},
		{"CrossProcess", testValueCrossProcess, e.s.Caps.CrossProcess},
		{"Kill", testValueKill, e.s.Caps.CrossProcess},
	})
}

// counterData is the data of a counter at n: the count and a filler that
// depends on it across most of MaxValueSize, so that data mixing two
// writes does not parse.
func counterData(n int) []byte {
	s := strconv.Itoa(n)
	return append([]byte(s+":"), bytes.Repeat([]byte(s+";"), 3000/(len(s)+1))...)
}

// parseCounter inverts counterData; nil data is 0.
func parseCounter(data []byte) (int, error) {
	if data == nil {
		return 0, nil
	}
	s, rest, ok := strings.Cut(string(data), ":")
	n, err := strconv.Atoi(s)
	if !ok || err != nil || !bytes.Equal(data, counterData(n)) {
		return 0, fmt.Errorf("torn or foreign data: %.40q… (%d bytes)", rest, len(data))
	}
	return n, nil
}

// increment adds one to the counter of v, retrying on conflicts; it
// returns the version of its write and how many conflicts it met.
func increment(ctx context.Context, v baton.Value) (uint64, int, error) {
	conflicts := 0
	data, ver, err := v.Load(ctx)
	for err == nil {
		var n int
		if n, err = parseCounter(data); err != nil {
			break
		}
		var now uint64
		now, err = v.CompareAndSwap(ctx, ver, counterData(n+1))
		if err == nil {
			return now, conflicts, nil
		}
		if !errors.Is(err, baton.ErrConflict) {
			break
		}
		conflicts++
		if now <= ver {
			return 0, conflicts, fmt.Errorf("conflict reports version %d, not above %d", now, ver)
		}
		data, ver, err = v.Load(ctx)
	}
	return 0, conflicts, err
}

func testValueBasics(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	v, err := b.Value(ctx, name)
	ok(t, "Value", err)
	if v.Name() != name {
		t.Errorf("Name() = %q, want %q", v.Name(), name)
	}
	data, ver, err := v.Load(ctx)
	ok(t, "Load of a new name", err)
	if data != nil || ver != 0 {
		t.Fatalf("Load of a new name: %q, version %d; want nil, 0", data, ver)
	}
	_, err = v.CompareAndSwap(ctx, 7, []byte("x"))
	is(t, "CompareAndSwap(7) of a new name", err, baton.ErrConflict)
	big := make([]byte, baton.MaxValueSize)
	for i := range big {
		big[i] = byte(rand.IntN(256))
	}
	v1, err := v.CompareAndSwap(ctx, 0, big)
	ok(t, "CompareAndSwap(0) of a new name", err)
	if v1 == 0 {
		t.Fatal("CompareAndSwap returned version 0")
	}
	big[0]++ // the handle copied it
	other, err := b.Value(ctx, name)
	ok(t, "Value", err)
	defer other.Close()
	data, ver, err = other.Load(ctx)
	ok(t, "Load", err)
	big[0]--
	if ver != v1 || !bytes.Equal(data, big) {
		t.Fatalf("Load from another handle: %d bytes, version %d; want %d bytes, version %d", len(data), ver, len(big), v1)
	}
	// A conflict changes nothing and reports the current version.
	now, err := other.CompareAndSwap(ctx, 0, []byte("lost"))
	is(t, "CompareAndSwap(0) of a written name", err, baton.ErrConflict)
	if now != v1 {
		t.Errorf("conflict reported version %d, want %d", now, v1)
	}
	var be *baton.Error
	if !errors.As(err, &be) || be.Kind != baton.KindValue || be.Name != name {
		t.Errorf("conflict error %v is not a *baton.Error of the value", err)
	}
	v2, err := other.CompareAndSwap(ctx, v1, nil)
	ok(t, "CompareAndSwap(v1, nil)", err)
	if v2 <= v1 {
		t.Errorf("version %d after %d", v2, v1)
	}
	_, err = v.CompareAndSwap(ctx, v1, []byte("stale"))
	is(t, "CompareAndSwap with a stale version", err, baton.ErrConflict)
	data, ver, err = v.Load(ctx)
	ok(t, "Load", err)
	if ver != v2 || data == nil || len(data) != 0 {
		t.Errorf("after writing nil: %q (nil %v), version %d; want empty non-nil, version %d", data, data == nil, ver, v2)
	}
	ok(t, "Close", v.Close())
	ok(t, "second Close", v.Close())
}

func testValueBadInput(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	unchanged := e.sameObjects(t)
	for _, n := range []string{"", "a\x00b", strings.Repeat("x", 10240), "../x", "/", "\xff", "a//b", ".", "a/"} {
		_, err := b.Value(ctx, n)
		is(t, fmt.Sprintf("Value(%.20q)", n), err, baton.ErrInvalidName)
	}
	var nilCtx context.Context
	_, err := b.Value(nilCtx, name)
	is(t, "Value(nil ctx)", err, baton.ErrInvalidArgument)
	unchanged()
	v, err := b.Value(ctx, name)
	ok(t, "Value", err)
	defer v.Close()
	_, err = v.CompareAndSwap(ctx, 0, make([]byte, baton.MaxValueSize+1))
	is(t, "CompareAndSwap of too much data", err, baton.ErrInvalidArgument)
	_, err = v.CompareAndSwap(nilCtx, 0, nil)
	is(t, "CompareAndSwap(nil ctx)", err, baton.ErrInvalidArgument)
	_, _, err = v.Load(nilCtx)
	is(t, "Load(nil ctx)", err, baton.ErrInvalidArgument)
	_, _, err = v.Wait(nilCtx, 0)
	is(t, "Wait(nil ctx)", err, baton.ErrInvalidArgument)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = v.CompareAndSwap(cancelled, 0, []byte("x"))
	is(t, "CompareAndSwap(cancelled ctx)", err, context.Canceled)
	_, _, err = v.Load(cancelled)
	is(t, "Load(cancelled ctx)", err, context.Canceled)
	data, ver, err := v.Load(ctx)
	ok(t, "Load", err)
	if data != nil || ver != 0 {
		t.Errorf("refused writes wrote: %q, version %d", data, ver)
	}
}

// testValueCounter: handles × goroutines increment one counter by
// CompareAndSwap. The count equals the successes (no update lost), and
// every success has its own version, each above the one it replaced.
func testValueCounter(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	const handles, goroutines, per = 4, 4, 25
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		versions  []uint64 // guarded by mu
		conflicts atomic.Int64
	)
	for range handles {
		v, err := b.Value(ctx, name)
		ok(t, "Value", err)
		defer v.Close()
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range per {
					ver, c, err := increment(ctx, v)
					conflicts.Add(int64(c))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					versions = append(versions, ver)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	v, err := b.Value(ctx, name)
	ok(t, "Value", err)
	defer v.Close()
	data, last, err := v.Load(ctx)
	ok(t, "Load", err)
	n, err := parseCounter(data)
	ok(t, "final data", err)
	if n != len(versions) {
		t.Errorf("counter %d after %d successful increments", n, len(versions))
	}
	slices.Sort(versions)
	if len(slices.Compact(slices.Clone(versions))) != len(versions) {
		t.Errorf("two successful writes got one version: %v", versions)
	}
	if last != versions[len(versions)-1] {
		t.Errorf("final version %d, highest returned %d", last, versions[len(versions)-1])
	}
	t.Logf("%d increments, %d conflicts", n, conflicts.Load())
}

func testValueWait(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	w, err := b.Value(ctx, name)
	ok(t, "Value", err)
	defer w.Close()
	v, err := b.Value(ctx, name)
	ok(t, "Value", err)
	defer v.Close()
	// A version that differs already returns at once.
	v1, err := v.CompareAndSwap(ctx, 0, []byte("one"))
	ok(t, "CompareAndSwap", err)
	data, ver, err := w.Wait(ctx, 0)
	ok(t, "Wait(0) after a write", err)
	if ver != v1 || string(data) != "one" {
		t.Errorf("Wait(0) = %q, %d; want one, %d", data, ver, v1)
	}
	for round := range 5 {
		cur := ver
		got := make(chan error, 1)
		var wdata []byte
		var wver uint64
		go func() {
			var err error
			wdata, wver, err = w.Wait(ctx, cur)
			got <- err
		}()
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		select {
		case err := <-got:
			t.Fatalf("round %d: Wait returned %v before any write", round, err)
		default:
		}
		next, err := v.CompareAndSwap(ctx, cur, []byte(fmt.Sprint("round ", round)))
		ok(t, "CompareAndSwap", err)
		select {
		case err := <-got:
			ok(t, "Wait", err)
			if wver != next || string(wdata) != fmt.Sprint("round ", round) {
				t.Errorf("round %d: Wait = %q, %d; want version %d", round, wdata, wver, next)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Wait did not wake on a write", round)
		}
		ver = next
	}
	// A cancelled context, before and during the wait.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, _, err = w.Wait(cancelled, ver)
	is(t, "Wait(cancelled ctx)", err, context.Canceled)
	for range 5 {
		wctx, cancel := context.WithCancel(ctx)
		got := make(chan error, 1)
		go func() { _, _, err := w.Wait(wctx, ver); got <- err }()
		time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond)
		t0 := time.Now()
		cancel()
		select {
		case err := <-got:
			is(t, "Wait cancelled while waiting", err, context.Canceled)
			if d := time.Since(t0); d > e.s.Caps.CancelBound {
				t.Errorf("cancelled Wait returned after %v, bound %v", d, e.s.Caps.CancelBound)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("cancelled Wait did not return")
		}
	}
}

// testValueClose: Close races calls on the handle; after it every call is
// ErrClosed, a Wait in progress returns ErrClosed, and Backend.Close
// closes value handles.
func testValueClose(t *testing.T, e *env) {
	ctx := context.Background()
	b, err := e.s.Open(e.cfg)
	ok(t, "open", err)
	defer b.Close()
	name := e.name(t)
	for round := range 8 {
		v, err := b.Value(ctx, name)
		ok(t, "Value", err)
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					var err error
					switch (g + i) % 3 {
					case 0:
						_, _, err = v.Load(ctx)
					case 1:
						_, _, err = increment(ctx, v)
					default:
						var ver uint64
						if _, ver, err = v.Load(ctx); err == nil {
							wctx, cancel := context.WithTimeout(ctx, 2*time.Millisecond)
							_, _, err = v.Wait(wctx, ver)
							cancel()
							if errors.Is(err, context.DeadlineExceeded) {
								err = nil
							}
						}
					}
					if errors.Is(err, baton.ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("round %d: %v", round, err)
						return
					}
				}
			}()
		}
		waiting := make(chan error, 1)
		go func() {
			for {
				_, ver, err := v.Load(ctx)
				if err == nil {
					_, _, err = v.Wait(ctx, ver)
				}
				if err != nil {
					waiting <- err
					return
				}
			}
		}()
		time.Sleep(time.Duration(1+rand.IntN(10)) * time.Millisecond)
		ok(t, "Close", v.Close())
		wg.Wait()
		err = result(t, waiting, 10*time.Second, "Wait did not end when its handle closed")
		is(t, "Wait on a closing handle", err, baton.ErrClosed)
		_, _, err = v.Load(ctx)
		is(t, "Load after Close", err, baton.ErrClosed)
		_, err = v.CompareAndSwap(ctx, 0, nil)
		is(t, "CompareAndSwap after Close", err, baton.ErrClosed)
		_, _, err = v.Wait(ctx, 0)
		is(t, "Wait after Close", err, baton.ErrClosed)
	}
	v, err := b.Value(ctx, name)
	ok(t, "Value", err)
	ok(t, "Close backend", b.Close())
	_, _, err = v.Load(ctx)
	is(t, "Load after Backend.Close", err, baton.ErrClosed)
	_, err = b.Value(ctx, name)
	is(t, "Value after Backend.Close", err, baton.ErrClosed)
}
