//go:build linux

package shmvalue

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/batonlock/baton/ipc"
)

func open(t *testing.T) *Value { return openB(t) }

func openB(t testing.TB) *Value {
	t.Helper()
	ns, err := ipc.OpenNamespace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	v, err := OpenEntry(ns.Resolve(Kind, "v"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// A writer killed in the middle of its copy: its writer word names a dead
// process and the slot it filled holds garbage. Load still returns the
// last commit, and the next writer takes the word over.
func TestDeadWriterTakenOver(t *testing.T) {
	ctx := context.Background()
	v := open(t)
	v1, err := v.CompareAndSwap(ctx, 0, []byte("committed"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	v.writer.Store(uint64(12345)<<32 | uint64(cmd.Process.Pid))
	s := slot(v1 + 1)
	v.word(s).Store(7)
	v.copyIn(s+slotHdr, []byte("garbage"))
	data, ver, err := v.Load(ctx)
	if err != nil || ver != v1 || string(data) != "committed" {
		t.Fatalf("Load = %q, %d, %v; want committed, %d", data, ver, err, v1)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v2, err := v.CompareAndSwap(cctx, v1, []byte("next"))
	if err != nil || v2 != v1+1 {
		t.Fatalf("CompareAndSwap after a dead writer = %d, %v", v2, err)
	}
	if data, ver, _ := v.Load(ctx); ver != v2 || string(data) != "next" {
		t.Fatalf("Load = %q, %d", data, ver)
	}
}

// A live writer keeps its word: others wait, and take it once it is dead
// (a zombie counts).
func TestLiveWriterKept(t *testing.T) {
	ctx := context.Background()
	v := open(t)
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	p, _, okp, err := ipc.LookupProc(cmd.Process.Pid)
	if err != nil || !okp {
		t.Fatal(err, okp)
	}
	v.writer.Store(uint64(p.Tag())<<32 | uint64(p.PID))
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = v.CompareAndSwap(cctx, 0, []byte("x"))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CompareAndSwap while a live process writes: %v", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // a zombie: not reaped yet
	cctx, cancel = context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := v.CompareAndSwap(cctx, 0, []byte("x")); err != nil {
		t.Fatalf("CompareAndSwap after the writer died: %v", err)
	}
	_ = cmd.Wait()
}

// A committed slot whose size is out of range is reported, not retried
// for ever.
func TestDamagedSize(t *testing.T) {
	ctx := context.Background()
	v := open(t)
	v1, err := v.CompareAndSwap(ctx, 0, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	v.word(slot(v1)).Store(MaxData + 1)
	if _, _, err := v.Load(ctx); err == nil {
		t.Fatal("Load of a damaged slot succeeded")
	}
}
