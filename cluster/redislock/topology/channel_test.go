package topology

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// TestSentinelChannelFailover: a sender and a waiting receiver stream
// through a channel with replicas=1 while the master is SIGKILLed. Every
// message whose Send returned nil (acknowledged by the replica) is
// received; the sender retries those that failed, which may then come
// twice, and a batch taken from the old master that its replica missed is
// received again (as the driver documents); the order is kept, and the
// receiver, asleep on Pub/Sub, resumes on the new master.
func TestSentinelChannelFailover(t *testing.T) {
	s := sentinels(t)
	stream(t, s.url("ttl=3s&replicas=1"), fresh("stream"), func() error {
		m, killed, err := s.failover()
		if err == nil {
			err = s.rejoin(killed, m)
		}
		return err
	})
}

// TestClusterChannelMoves: the same stream while the channel's slot moves
// to another master and then fails over (replicas=1), and, without
// replicas, while it moves: acknowledged sends are received, in order.
func TestClusterChannelMoves(t *testing.T) {
	s := redisCluster(t)
	rep, moved := fresh("moved-rep"), fresh("moved")
	stream(t, s.url("ttl=3s&replicas=1"), rep, func() error {
		if err := s.migrate(nameSlot(rep)); err != nil {
			return err
		}
		return s.failover(nameSlot(rep))
	})
	stream(t, s.url("ttl=3s"), moved, func() error { return s.migrate(nameSlot(moved)) })
}

// stream sends numbered messages through the channel name of the backend
// at u, from one handle to a receiver on another, while disrupt runs, and
// checks what the receiver got.
func stream(t *testing.T, u, name string, disrupt func() error) {
	var total atomic.Uint64 // set once the last message is sent
	ctx := context.Background()
	send, err := open(t, u).Channel(ctx, name, baton.ChannelOptions{Capacity: 64, MaxMessage: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer send.Close()
	recv, err := open(t, u).Channel(ctx, name, baton.ChannelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	var got atomic.Int64
	errc := make(chan error, 1)
	go func() {
		next := uint64(0)  // the lowest sequence number not yet seen
		last := ^uint64(0) // the one received last
		for {
			msgs, err := recv.RecvBatch(ctx, 16)
			if errors.Is(err, baton.ErrChannelClosed) {
				if next != total.Load() {
					errc <- errors.New("the channel ended before the last message")
					return
				}
				errc <- nil
				return
			}
			if err != nil { // the master is down: try again
				time.Sleep(20 * time.Millisecond)
				continue
			}
			for _, m := range msgs {
				seq := binary.LittleEndian.Uint64(m)
				// Received again: a retried send, or takes the failover
				// undid (a batch's worth), from there on in order.
				switch {
				case seq > next:
					errc <- fmt.Errorf("message %d before %d: lost", seq, next)
					return
				case seq == next:
					next++
				case seq > last+1:
					errc <- fmt.Errorf("message %d after %d, both received before: out of order", seq, last)
					return
				}
				last = seq
				got.Add(1)
			}
		}
	}()
	retries := 0
	done := make(chan struct{}) // the failover is over and the old master back as a replica
	var seq uint64
	// ended says whether the receiver has stopped, with its error: the
	// sender must not wait for room that nobody will make.
	ended := func() bool {
		select {
		case err := <-errc:
			errc <- err
			return true
		default:
			return false
		}
	}
	for ; (seq < 1000 || !closed(done)) && !ended(); seq++ {
		if seq == 200 {
			go func() {
				defer close(done)
				if err := disrupt(); err != nil {
					t.Error(err)
				}
			}()
		}
		for send.Send(ctx, binary.LittleEndian.AppendUint64(nil, seq)) != nil && !ended() {
			retries++
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Millisecond) // so that the stream goes on through the failover
	}
	if ended() {
		if seq > 200 {
			<-done // the topology is whole again for the next test
		}
		if err := <-errc; err != nil {
			t.Fatalf("after %d messages: %v", seq, err)
		}
		t.Fatalf("the receiver stopped after %d messages", seq)
	}
	total.Store(seq)
	for send.CloseSend(ctx) != nil {
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the receiver did not finish: %d messages taken", got.Load())
	}
	t.Logf("%s: %d messages, %d sends retried, %d taken", name, seq, retries, got.Load())
}

// fresh is a channel name no earlier run used (a closed channel stays
// closed).
func fresh(name string) string { return fmt.Sprint(name, "-", time.Now().UnixNano()) }

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
