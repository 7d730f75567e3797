//go:build linux

package shmsem

import (
	"testing"
	"time"
	"unsafe"

	"github.com/batonlock/baton/internal/word"
	"github.com/batonlock/baton/ipc"
)

// A ring that wakes a sleeper clears the sleep bit, so the rings that follow
// before the sleeper has run make no system call; a sleeper is still woken.
func TestRingClearsSleepBit(t *testing.T) {
	var bell word.Uint32
	bell.Store(1) // a waiter sleeps
	ring(&bell)
	if v := bell.Load(); v != 2 {
		t.Fatalf("bell after the waking ring = %d, want 2 (changed, sleep bit clear)", v)
	}
	ring(&bell)
	if v := bell.Load(); v != 4 {
		t.Fatalf("bell after a second ring = %d, want 4", v)
	}

	bell.Store(0)
	woke := make(chan bool, 1)
	go func() {
		w := bell.Load()
		if !bell.CompareAndSwap(w, w|1) {
			woke <- true // rung already
			return
		}
		timedOut, err := ipc.FutexWait((*uint32)(unsafe.Pointer(&bell)), w|1, 10*time.Second)
		woke <- err == nil && !timedOut
	}()
	for bell.Load()&1 == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(5 * time.Millisecond) // into the futex wait, most likely
	ring(&bell)
	if !<-woke {
		t.Fatal("the sleeper was not woken by the ring")
	}
}
