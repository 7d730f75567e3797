package word

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestStoreThenLoad is the store-buffer test on words of shared memory:
// two threads each store to their own word and then load the other's. In
// every round at least one of them must see the other's store, as a reader
// and a writer of the locks here must see each other; sync/atomic's Store
// under the race detector lets both miss.
func TestStoreThenLoad(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: the two threads never run at once")
	}
	b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(b)
	w := func(i int) *Uint64 { return (*Uint64)(unsafe.Pointer(&b[i*64])) }
	x, y, doneX, doneY, stop := w(0), w(1), w(2), w(3), w(4)
	// Rounds go in step; the first thread past the deadline ends them
	// at the round after its own, which the other may have begun.
	const rounds = 200_000
	deadline := time.Now().Add(2 * time.Second)
	seenX, seenY := make([]uint64, rounds+1), make([]uint64, rounds+1)
	run := func(mine, other, done, otherDone *Uint64, seen []uint64, end chan<- struct{}) {
		runtime.LockOSThread()
		defer func() { runtime.UnlockOSThread(); end <- struct{}{} }()
		for i := uint64(1); i <= rounds; i++ {
			if s := stop.Load(); s != 0 && i >= s {
				return
			}
			mine.Store(i)
			seen[i] = other.Load()
			done.Store(i)
			for otherDone.Load() < i {
				if s := stop.Load(); s != 0 && i >= s {
					return
				}
			}
			if i%1024 == 0 && time.Now().After(deadline) {
				stop.CompareAndSwap(0, i+1)
			}
		}
	}
	end := make(chan struct{})
	go run(x, y, doneX, doneY, seenX, end)
	go run(y, x, doneY, doneX, seenY, end)
	<-end
	<-end
	n := uint64(rounds)
	if s := stop.Load(); s != 0 {
		n = s - 1
	}
	both := 0
	for i := uint64(1); i <= n; i++ {
		if seenX[i] < i && seenY[i] < i {
			both++
		}
	}
	if both > 0 {
		t.Fatalf("in %d of %d rounds neither thread saw the other's store", both, n)
	}
	t.Logf("%d rounds", n)
}
