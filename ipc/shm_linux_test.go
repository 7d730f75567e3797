//go:build linux

package ipc

import (
	"errors"
	"io/fs"
	"os"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/batonlock/baton"
)

func TestRegion(t *testing.T) {
	ns, err := OpenNamespace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kind, name string
		size       int
		want       error
	}{
		{"shm", "", 64, baton.ErrInvalidName},
		{"shm", "../x", 64, baton.ErrInvalidName},
		{"shm", "a", 0, baton.ErrInvalidArgument},
		{"shm", "a", -1, baton.ErrInvalidArgument},
		{"shm", "a", MaxRegionSize + 1, baton.ErrInvalidArgument},
		{"../x", "a", 64, baton.ErrInvalidArgument},
		{"", "a", 64, baton.ErrInvalidArgument},
	} {
		if _, err := OpenRegion(ns, tc.kind, tc.name, tc.size); !errors.Is(err, tc.want) {
			t.Errorf("OpenRegion(%q, %q, %d) = %v, want %v", tc.kind, tc.name, tc.size, err, tc.want)
		}
	}
	if ents, _ := os.ReadDir(ns.Dir()); len(ents) != 0 {
		t.Fatalf("bad input created %v", ents)
	}
	if _, err := OpenExistingRegion(ns, "shm", "a/b", 64); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenExistingRegion of a missing region = %v", err)
	}
	r1, err := OpenRegion(ns, "shm", "a/b", 100)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	r2, err := OpenRegion(ns, "shm", "a/b", 100)
	if err != nil {
		t.Fatal(err)
	}
	if r1.Size() != 100 || r1.Bytes()[0] != 0 {
		t.Fatalf("new region: size %d, first byte %d", r1.Size(), r1.Bytes()[0])
	}
	(*atomic.Uint64)(unsafe.Pointer(&r1.Bytes()[8])).Store(42)
	if v := (*atomic.Uint64)(unsafe.Pointer(&r2.Bytes()[8])).Load(); v != 42 {
		t.Fatalf("second mapping reads %d, want 42", v)
	}
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r2.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := OpenRegion(ns, "shm", "a/b", 200); !errors.Is(err, baton.ErrMismatch) {
		t.Fatalf("open with another size = %v, want ErrMismatch", err)
	}
	if err := RemoveRegion(ns, "shm", "a/b"); err != nil {
		t.Fatal(err)
	}
	if err := RemoveRegion(ns, "shm", "a/b"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("second remove = %v", err)
	}
	r3, err := OpenRegion(ns, "shm", "a/b", 200)
	if err != nil {
		t.Fatal(err)
	}
	defer r3.Close()
	if r3.Bytes()[8] != 0 {
		t.Fatal("region recreated after removal is not zero-filled")
	}
}

func TestFutexWaitWake(t *testing.T) {
	ns, err := OpenNamespace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, err := OpenRegion(ns, "shm", "f", 8)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w := (*uint32)(unsafe.Pointer(&r.Bytes()[0]))
	// Value differs: returns at once.
	if to, err := FutexWait(w, 1, -1); to || err != nil {
		t.Fatalf("wait on another value = %v, %v", to, err)
	}
	if to, err := FutexWait(w, 0, 2e6); !to || err != nil {
		t.Fatalf("timed wait = %v, %v; want timeout", to, err)
	}
	done := make(chan error)
	go func() {
		for atomic.LoadUint32(w) == 0 {
			if _, err := FutexWait(w, 0, -1); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	atomic.StoreUint32(w, 1)
	for {
		n, err := FutexWake(w, 1)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			_ = n
			return
		default:
		}
	}
}
