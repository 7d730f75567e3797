//go:build linux

package shmchan

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
)

// recvAll takes what c holds now, as strings.
func recvAll(t *testing.T, c *Chan) []string {
	t.Helper()
	var got []string
	for {
		_, err := c.Recv(context.Background(), 8, false, func(m []byte) { got = append(got, string(m)) })
		if errors.Is(err, baton.ErrChannelEmpty) {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A receiver killed in the middle of a message: the next receiver takes
// the end over, and that message is lost, not given twice.
func TestOneReaderKilled(t *testing.T) {
	ns := testNS(t)
	c := openKind(t, ns, "c", 4, 16, true)
	ctx := context.Background()
	if _, err := c.Send(ctx, [][]byte{[]byte("a"), []byte("b"), []byte("c")}, true); err != nil {
		t.Fatal(err)
	}
	start(t, ns, "read-and-hang", "reading").Process.Kill()
	r := openTest(t, ns, "c", 0, 0)
	eventually(t, 5*time.Second, "the end taken over", func() bool {
		_, err := r.Recv(ctx, 1, false, func([]byte) {})
		return !errors.Is(err, baton.ErrChannelBusy)
	})
	// The first Recv above took "b"; "a" went with the killed reader.
	if got := recvAll(t, r); strings.Join(got, ",") != "c" {
		t.Errorf("after the killed reader: %q, want [c]", got)
	}
	// Its slot is free again: the ring holds 4.
	for range 4 {
		if _, err := c.Send(ctx, [][]byte{[]byte("x")}, false); err != nil {
			t.Fatal(err)
		}
	}
}

// A sender killed while writing: nothing of its message is received, and
// the next sender's are.
func TestOneWriterKilled(t *testing.T) {
	ns := testNS(t)
	r := openKind(t, ns, "c", 4, 16, true)
	ctx := context.Background()
	start(t, ns, "write-and-hang", "reserved").Process.Kill()
	s := openTest(t, ns, "c", 0, 0)
	eventually(t, 5*time.Second, "the end taken over", func() bool {
		_, err := s.Send(ctx, [][]byte{[]byte("next")}, false)
		return err == nil
	})
	if got := recvAll(t, r); strings.Join(got, ",") != "next" {
		t.Errorf("after the killed writer: %q, want [next]", got)
	}
}

// The table entry that an end names is not taken over by a new handle
// while the end still names it, even when the table is full of dead
// entries: the end's next taker recovers it first.
func TestOneEndEntryKept(t *testing.T) {
	ns := testNS(t)
	h := openKind(t, ns, "c", 4, 16, true)
	ctx := context.Background()
	if _, err := h.Recv(ctx, 1, false, func([]byte) {}); !errors.Is(err, baton.ErrChannelEmpty) {
		t.Fatal(err)
	}
	// Every entry, h's too, looks like a process that has exited: this
	// pid with another start time.
	dead := uint64(h.self.Tag()+1)<<32 | uint64(uint32(h.self.PID))
	for i := uint64(1); i < tableSize; i++ {
		h.entry(i).Store(dead)
	}
	n := openTest(t, ns, "c", 0, 0)
	if n.me == h.me {
		t.Fatalf("a new handle took entry %d, which the receiving end names", h.me)
	}
	if _, err := n.Recv(ctx, 1, false, func([]byte) {}); !errors.Is(err, baton.ErrChannelEmpty) {
		t.Fatalf("Recv of the new handle: %v, want the end taken over and the channel empty", err)
	}
	if o := n.u32(offOneRecv).Load(); uint64(o) != n.me {
		t.Errorf("the receiving end names entry %d, want the new handle's %d", o, n.me)
	}
}

// Inspect says a channel is one-to-one and counts what it holds.
func TestOneInspect(t *testing.T) {
	ns := testNS(t)
	c := openKind(t, ns, "c", 4, 16, true)
	if _, err := c.Send(context.Background(), [][]byte{[]byte("a"), []byte("b")}, true); err != nil {
		t.Fatal(err)
	}
	in, err := Inspect(ns, "c")
	if err != nil || !strings.HasPrefix(in.Detail, "2 of 4 messages, up to 16 bytes each, one-to-one") ||
		len(in.Holders) != 1 || in.Holders[0].PID != c.self.PID || in.Holders[0].Mode != "sending end" {
		t.Errorf("Inspect = %+v, %v; want 2 messages held and this process at the sending end", in, err)
	}
}

// Removal of the file ends the call that waits at an end and the calls
// that wait for its turn, and the sends of the other end.
func TestOneRemoved(t *testing.T) {
	ns := testNS(t)
	c := openKind(t, ns, "c", 1, 8, true)
	ctx := context.Background()
	res := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := c.Recv(ctx, 1, true, func([]byte) {})
			res <- err
		}()
	}
	time.Sleep(20 * time.Millisecond) // one sleeps at the end, two wait for its turn
	if err := ipc.RemoveRegion(ns, Kind, "c"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		select {
		case err := <-res:
			if !errors.Is(err, baton.ErrLost) {
				t.Errorf("waiting Recv after removal: %v, want ErrLost", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a waiting Recv did not hear of the removal")
		}
	}
	if _, err := c.Send(ctx, [][]byte{nil}, true); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Send after removal: %v, want ErrLost", err)
	}
}

// A send that waited for its end's turn while the file was removed fails,
// though the ring has room.
func TestOneRemovedWhileWaitingForTheTurn(t *testing.T) {
	ns := testNS(t)
	c := openKind(t, ns, "c", 4, 8, true)
	ctx := context.Background()
	inFill, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- c.SendFunc(ctx, true, func(buf []byte) (int, error) {
			close(inFill)
			<-release
			return 0, nil
		})
	}()
	<-inFill
	second := make(chan error, 1)
	go func() {
		_, err := c.Send(ctx, [][]byte{nil}, true)
		second <- err
	}()
	time.Sleep(20 * time.Millisecond) // the second waits for the turn
	if err := ipc.RemoveRegion(ns, Kind, "c"); err != nil {
		t.Fatal(err)
	}
	for !c.gone.Load() {
		time.Sleep(time.Millisecond)
	}
	close(release)
	<-first
	if err := <-second; !errors.Is(err, baton.ErrLost) {
		t.Errorf("a Send that waited for the turn across the removal: %v, want ErrLost", err)
	}
}
