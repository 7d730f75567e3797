package topology

import (
	"context"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// TestSentinelChannelFailover: a sender and a waiting receiver stream
// through a channel with replicas=1 while the master is SIGKILLed. Every
// message whose Send returned nil (acknowledged by the replica) is
// received; the sender retries those that failed, which may then come
// twice, next to each other; the order is kept, and the receiver, asleep
// on Pub/Sub, resumes on the new master.
func TestSentinelChannelFailover(t *testing.T) {
	s := sentinels(t)
	stream(t, s.url("ttl=3s&replicas=1"), "stream", func() error {
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
	stream(t, s.url("ttl=3s&replicas=1"), "moved-rep", func() error {
		if err := s.migrate(nameSlot("moved-rep")); err != nil {
			return err
		}
		return s.failover(nameSlot("moved-rep"))
	})
	stream(t, s.url("ttl=3s"), "moved", func() error { return s.migrate(nameSlot("moved")) })
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
		next := uint64(0) // the lowest sequence number not yet seen
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
				switch {
				case seq == next:
					next++
				case seq+1 == next: // a retried send, or a take the failover undid
				default:
					errc <- errors.New("message out of order or lost")
					return
				}
				got.Add(1)
			}
		}
	}()
	retries := 0
	done := make(chan struct{}) // the failover is over and the old master back as a replica
	var seq uint64
	for ; seq < 1000 || !closed(done); seq++ {
		if seq == 200 {
			go func() {
				defer close(done)
				if err := disrupt(); err != nil {
					t.Error(err)
				}
			}()
		}
		for send.Send(ctx, binary.LittleEndian.AppendUint64(nil, seq)) != nil {
			retries++
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Millisecond) // so that the stream goes on through the failover
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

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
