//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package ipc

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// Messages sent by another process arrive in order, and typed receives pick
// the first message of their type.
func TestMsgQueueAcrossProcesses(t *testing.T) {
	const n = 3000
	ns := sysvNS(t)
	q, err := OpenMsgQueue(ns, "q", 64)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	cmd := svHelper(t, ns, "send", "q", n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// First the messages of type 3, in order, while the sender may still
	// be sending; then all the others in order.
	var want3 []int
	for i := range n {
		if 1+i%3 == 3 {
			want3 = append(want3, i)
		}
	}
	for _, w := range want3 {
		m, err := q.Receive(ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := strconv.Atoi(string(m.Body)); m.Type != 3 || got != w {
			t.Fatalf("type-3 receive got type %d body %q, want %d", m.Type, m.Body, w)
		}
	}
	last := -1
	for range n - len(want3) {
		m, err := q.Receive(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := strconv.Atoi(string(m.Body))
		if got <= last || int64(1+got%3) != m.Type || m.Type == 3 {
			t.Fatalf("got message %d of type %d after %d", got, m.Type, last)
		}
		last = got
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("sender: %v", err)
	}
	if _, err := q.TryReceive(0); !errors.Is(err, ErrWouldBlock) {
		t.Fatalf("queue not empty: %v", err)
	}
}

func TestMsgQueueLimits(t *testing.T) {
	ns := sysvNS(t)
	msgmax, err := MsgMax()
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{0, -1, msgmax + 1} {
		if _, err := OpenMsgQueue(ns, "q", size); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("OpenMsgQueue(size %d): %v", size, err)
		}
	}
	if _, err := OpenMsgQueue(ns, "a//b", 8); !errors.Is(err, baton.ErrInvalidName) {
		t.Errorf("bad name: %v", err)
	}
	if names, _ := ns.Names(KindMsgQ); len(names) != 0 {
		t.Fatalf("refused opens left %v", names)
	}
	q, err := OpenMsgQueue(ns, "q", 16)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := OpenMsgQueue(ns, "q", 32); !errors.Is(err, baton.ErrMismatch) {
		t.Fatalf("other size: %v", err)
	}
	ctx := context.Background()
	if err := q.Send(ctx, 1, make([]byte, 17)); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Fatalf("17 bytes into a 16-byte queue: %v", err)
	}
	for _, typ := range []int64{0, -1} {
		if err := q.Send(ctx, typ, []byte("x")); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Fatalf("type %d: %v", typ, err)
		}
	}
	if st, _ := q.Stat(); st.QNum != 0 {
		t.Fatalf("refused sends left %d messages", st.QNum)
	}
	body := bytes.Repeat([]byte{7}, 16)
	if err := q.Send(ctx, 5, body); err != nil {
		t.Fatal(err)
	}
	if err := q.Send(ctx, 6, nil); err != nil {
		t.Fatal(err)
	}
	m, err := q.Receive(ctx, 0)
	if err != nil || m.Type != 5 || !bytes.Equal(m.Body, body) {
		t.Fatalf("receive: %+v %v", m, err)
	}
	if m, err := q.Receive(ctx, -10); err != nil || m.Type != 6 || len(m.Body) != 0 {
		t.Fatalf("empty message: %+v %v", m, err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if err := q.Send(ctx, 1, nil); !errors.Is(err, baton.ErrClosed) {
		t.Fatalf("send on a closed handle: %v", err)
	}
}

func TestMsgQueueCancel(t *testing.T) {
	ns := sysvNS(t)
	q, err := OpenMsgQueue(ns, "c", 1024)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	// Receive on an empty queue.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := q.Receive(ctx, 0); done <- err }()
	time.Sleep(10 * time.Millisecond)
	t0 := time.Now()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled receive: %v", err)
	}
	if d := time.Since(t0); d > 50*time.Millisecond {
		t.Errorf("cancelled receive returned after %v", d)
	}
	// Send on a full queue.
	body := make([]byte, 1024)
	full := false
	for range 1 << 12 {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		err := q.Send(sctx, 1, body)
		scancel()
		if errors.Is(err, context.DeadlineExceeded) {
			full = true
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !full {
		t.Fatal("queue never filled")
	}
	st, _ := q.Stat()
	ctx, cancel = context.WithCancel(context.Background())
	go func() { done <- q.Send(ctx, 2, []byte("late")) }()
	time.Sleep(10 * time.Millisecond)
	t0 = time.Now()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled send: %v", err)
	}
	if d := time.Since(t0); d > 50*time.Millisecond {
		t.Errorf("cancelled send returned after %v", d)
	}
	if st2, _ := q.Stat(); st2.QNum != st.QNum {
		t.Fatalf("cancelled send changed the queue: %d messages, were %d", st2.QNum, st.QNum)
	}
	// Removal wakes a receiver with ErrRemoved.
	for {
		if _, err := q.TryReceive(0); err != nil {
			break
		}
	}
	go func() { _, err := q.Receive(context.Background(), 0); done <- err }()
	time.Sleep(10 * time.Millisecond)
	if err := RemoveMsgQueue(ns, "c"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrRemoved) {
		t.Fatalf("receiver of a removed queue: %v", err)
	}
}
