package redislock

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/chantest"
	"github.com/batonlock/baton/cluster/internal/redistest"
)

var (
	chanSingle  = chantest.Suite{Name: "redis", Open: openCfg, CrossProcess: true, Objects: chanObjects, KillMessages: 20000}
	chanCluster = chantest.Suite{Name: "redis-cluster", Open: openCfg, CrossProcess: true, Objects: chanObjects, KillMessages: 20000}
)

func init() { chantest.Helper(chanSingle, chanCluster) }

func TestChannelSingle(t *testing.T) {
	s := startRedis(t)
	chantest.Run(t, chanSingle, s.URL(testQuery))
}

func TestChannelCluster(t *testing.T) {
	ss := startCluster(t, 3)
	chantest.Run(t, chanCluster, clusterURL(ss, testQuery))
}

// chanObjects lists the objects of the backend at cfg, as "kind name".
func chanObjects(cfg string) ([]string, error) {
	b, err := openCfg(cfg)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	infos, err := b.(baton.Inspector).List(context.Background())
	if err != nil {
		return nil, err
	}
	var out []string
	for _, in := range infos {
		out = append(out, string(in.Kind)+" "+in.Name)
	}
	return out, nil
}

func openChan(t *testing.T, b baton.Backend, name string, o baton.ChannelOptions) baton.Channel {
	t.Helper()
	c, err := b.Channel(context.Background(), name, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitSubscribed waits until channel has a subscriber on the server.
func waitSubscribed(t *testing.T, s *server, channel string) {
	t.Helper()
	c := s.Client()
	defer c.Close()
	eventually(t, func() error {
		n, err := c.PubSubNumSub(context.Background(), channel).Result()
		if err != nil || n[channel] == 0 {
			return errors.New("no subscriber on " + channel)
		}
		return nil
	})
}

// TestChannelResubscribeWakes: a message whose wake-up was lost (here, one
// pushed behind the scripts' back, which publishes none) is received once
// the Pub/Sub connection is made again, with no timer.
func TestChannelResubscribeWakes(t *testing.T) {
	s := startRedis(t)
	b := open(t, s.URL(testQuery))
	c := openChan(t, b, "resub", baton.ChannelOptions{Capacity: 4, MaxMessage: 16})
	got := make(chan string, 1)
	go func() {
		m, err := c.Recv(context.Background())
		got <- string(m) + " " + errString(err)
	}()
	k := newChanKeys(DefaultPrefix, "resub")
	waitSubscribed(t, s, k.rwake)
	rc := s.Client()
	defer rc.Close()
	ctx := context.Background()
	if err := rc.RPush(ctx, k.keys[0], "silent").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		t.Fatalf("Recv returned %q with no wake-up", r)
	case <-time.After(100 * time.Millisecond):
	}
	if err := rc.Do(ctx, "client", "kill", "type", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r != "silent <nil>" {
			t.Fatalf("Recv = %q", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting Recv did not look again when its subscription was made again")
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestChannelInspectRemove: status and ls describe a channel; rm wakes its
// waiters, which, like every later call, fail with ErrLost.
func TestChannelInspectRemove(t *testing.T) {
	s := startRedis(t)
	b, in := inspector(t, s.URL(testQuery))
	ctx := context.Background()
	c := openChan(t, b, "jobs/x", baton.ChannelOptions{Capacity: 8, MaxMessage: 32})
	for _, m := range []string{"a", "b"} {
		if err := c.Send(ctx, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.CloseSend(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := in.Inspect(ctx, baton.KindChannel, "jobs/x")
	if err != nil {
		t.Fatal(err)
	}
	if info.Capacity != 8 || info.Detail != "2 of 8 messages, up to 32 bytes each, closed" {
		t.Errorf("Inspect = %+v", info)
	}
	list, err := in.List(ctx)
	if err != nil || len(list) != 1 || list[0].Kind != baton.KindChannel || list[0].Name != "jobs/x" {
		t.Errorf("List = %+v, %v", list, err)
	}
	r := openChan(t, b, "waited", baton.ChannelOptions{Capacity: 1, MaxMessage: 8})
	res := make(chan error, 1)
	go func() {
		_, err := r.Recv(ctx)
		res <- err
	}()
	waitSubscribed(t, s, newChanKeys(DefaultPrefix, "waited").rwake)
	for _, name := range []string{"jobs/x", "waited"} {
		if err := in.Remove(ctx, baton.KindChannel, name); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-res:
		if !errors.Is(err, baton.ErrLost) {
			t.Errorf("waiting Recv at removal: %v, want ErrLost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting Recv did not hear of the removal")
	}
	if err := c.Send(ctx, []byte("x")); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Send to a removed channel: %v, want ErrLost", err)
	}
	if _, err := in.Inspect(ctx, baton.KindChannel, "jobs/x"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Inspect of a removed channel: %v", err)
	}
	if err := in.Remove(ctx, baton.KindChannel, "jobs/x"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove of a removed channel: %v", err)
	}
}

// TestChannelReplicas: with replicas=1, a send no replica acknowledges
// reports ErrNotReplicated and the message stays sent on the master; with
// a replica, sends and receives succeed.
func TestChannelReplicas(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	b := open(t, s.URL("ttl=1s&replicas=1&replica_timeout=20ms"))
	c := openChan(t, b, "rep", baton.ChannelOptions{Capacity: 4, MaxMessage: 8})
	err := c.Send(ctx, []byte("m"))
	if !errors.Is(err, ErrNotReplicated) || !strings.Contains(err.Error(), "sent on the master") {
		t.Fatalf("Send with no replica: %v, want ErrNotReplicated", err)
	}
	plain := openChan(t, open(t, s.URL("ttl=1s")), "rep", baton.ChannelOptions{})
	if m, err := plain.TryRecv(ctx); err != nil || string(m) != "m" {
		t.Fatalf("TryRecv after the unacknowledged Send = %q, %v", m, err)
	}
	startReplica(t, s)
	if err := c.Send(ctx, []byte("n")); err != nil {
		t.Fatalf("Send with a replica: %v", err)
	}
	if m, err := c.Recv(ctx); err != nil || string(m) != "n" {
		t.Fatalf("Recv with a replica = %q, %v", m, err)
	}
}

// BenchmarkChannelPingPong: a message there and back between two handles
// of one process on a local server (ns/op is two one-way trips).
func BenchmarkChannelPingPong(b *testing.B) {
	s := startRedis(b)
	ctx := context.Background()
	be, err := OpenURL(ctx, s.URL(""))
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	ping, _ := be.Channel(ctx, "ping", baton.ChannelOptions{Capacity: 64, MaxMessage: 64})
	pong, _ := be.Channel(ctx, "pong", baton.ChannelOptions{Capacity: 64, MaxMessage: 64})
	go func() {
		for {
			m, err := ping.Recv(ctx)
			if err != nil || pong.Send(ctx, m) != nil {
				return
			}
		}
	}()
	msg := make([]byte, 64)
	b.ResetTimer()
	for range b.N {
		if err := ping.Send(ctx, msg); err != nil {
			b.Fatal(err)
		}
		if _, err := pong.Recv(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	ping.Close()
	pong.Close()
}

// BenchmarkChannelBatch64: 64-byte messages in batches of 64 from one
// handle to a receiver on another (ns/op per message).
func BenchmarkChannelBatch64(b *testing.B) {
	s := startRedis(b)
	ctx := context.Background()
	be, err := OpenURL(ctx, s.URL(""))
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	tx, _ := be.Channel(ctx, "batch", baton.ChannelOptions{Capacity: 1024, MaxMessage: 64})
	rx, _ := be.Channel(ctx, "batch", baton.ChannelOptions{})
	done := make(chan int)
	go func() {
		n := 0
		for n < b.N {
			ms, err := rx.RecvBatch(ctx, 64)
			if err != nil {
				break
			}
			n += len(ms)
		}
		done <- n
	}()
	batch := make([][]byte, 64)
	for i := range batch {
		batch[i] = make([]byte, 64)
	}
	b.ResetTimer()
	for sent := 0; sent < b.N; {
		n, err := tx.SendBatch(ctx, batch[:min(64, b.N-sent)])
		if err != nil {
			b.Fatal(err)
		}
		sent += n
	}
	<-done
	b.StopTimer()
	tx.Close()
	rx.Close()
}
