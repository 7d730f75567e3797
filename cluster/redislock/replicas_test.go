package redislock

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redistest"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/cluster/redlock"
)

func TestReplicaOptions(t *testing.T) {
	for i, opts := range [][]lease.Option{
		{WithReplicas(0)},
		{WithReplicas(-1)},
		{WithReplicas(1), WithReplicaTimeout(0)},
		{WithReplicas(1), WithReplicaTimeout(-time.Millisecond)},
		{WithReplicas(1), lease.WithTTL(3 * time.Second), WithReplicaTimeout(600 * time.Millisecond)},
		{WithReplicaTimeout(10 * time.Millisecond)},
	} {
		if _, err := buildOptions(opts); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("case %d: err %v, want ErrInvalidArgument", i, err)
		}
	}
	o, err := buildOptions([]lease.Option{WithReplicas(2)})
	if err != nil {
		t.Fatal(err)
	}
	if o.rep.replicas != 2 || o.rep.waitMS != 833 {
		t.Fatalf("defaults: %+v", o.rep)
	}
	o, err = buildOptions([]lease.Option{WithReplicas(1), lease.WithTTL(60 * time.Second), WithReplicaTimeout(3 * time.Second)})
	if err != nil || o.rep.waitMS != 3000 {
		t.Fatalf("%+v %v", o.rep, err)
	}
	if o, _ := buildOptions(nil); o.rep.replicas != 0 {
		t.Fatalf("replicas without the option: %+v", o.rep)
	}
	// Another backend refuses the option.
	if _, err := redlock.New(nil, WithReplicas(1)); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Fatalf("redlock with WithReplicas: %v", err)
	}
}

func TestReplicaURL(t *testing.T) {
	for _, u := range []string{
		"redis://127.0.0.1:1?replicas=0", "redis://127.0.0.1:1?replicas=x", "redis://127.0.0.1:1?replicas=1&replicas=2",
		"redis://127.0.0.1:1?replica_timeout=1s", "redis://127.0.0.1:1?replicas=1&replica_timeout=banana",
		"redis+sentinel://127.0.0.1:1", "redis+sentinel://127.0.0.1:1/", "redis+sentinel://127.0.0.1:1/m/0/x",
		"redis+sentinel://127.0.0.1:1/m/x", "redis+sentinel://127.0.0.1:1,,127.0.0.1:2/m",
		"redis+sentinel://127.0.0.1:1/m?master_name=n", "redis+sentinel://127.0.0.1:1/m?addr=127.0.0.1:2",
		"redis+sentinel://127.0.0.1:99999/m", "redis+sentinel://127.0.0.1:1/m?replicas=-1",
		"redis+sentinel://127.0.0.1:1/m?sentinel_password=a&sentinel_password=b",
	} {
		b, err := OpenURL(context.Background(), u)
		if !errors.Is(err, baton.ErrInvalidArgument) {
			if b != nil {
				b.Close()
			}
			t.Errorf("OpenURL(%q): err %v, want ErrInvalidArgument", u, err)
		}
	}
	u := "redis+sentinel://user:pw@127.0.0.1:1,127.0.0.1:2/mymaster/3?sentinel_password=sp&ttl=3s&replicas=1&dial_timeout=2s"
	pu, err := url.Parse(strings.Replace(u, "&ttl=3s&replicas=1", "", 1))
	if err != nil {
		t.Fatal(err)
	}
	fo, err := sentinelOptions(pu, "redis")
	if err != nil {
		t.Fatal(err)
	}
	if fo.MasterName != "mymaster" || len(fo.SentinelAddrs) != 2 || fo.SentinelAddrs[1] != "127.0.0.1:2" || fo.DB != 3 ||
		fo.Username != "user" || fo.Password != "pw" || fo.SentinelPassword != "sp" || fo.DialTimeout != 2*time.Second {
		t.Fatalf("failover options %+v", fo)
	}
	// The URL is good; OpenURL then asks the Sentinels, which are not
	// there, and says so.
	b, err := OpenURL(context.Background(), u+"&request_timeout=1s")
	if err == nil {
		b.Close()
	}
	if err == nil || errors.Is(err, baton.ErrInvalidArgument) || !strings.Contains(err.Error(), "127.0.0.1:1,127.0.0.1:2") {
		t.Fatalf("OpenURL(%q): %v, want a failure to reach the Sentinels", u, err)
	}
	if _, err := NewSentinel(nil); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Fatalf("NewSentinel(nil): %v", err)
	}
}

// TestReplicasUnacknowledged: with no replica, every grant fails with
// ErrNotReplicated and leaves nothing held; a renewal that is not
// acknowledged is retried until the Loss fires.
func TestReplicasUnacknowledged(t *testing.T) {
	s := redistest.Start(t)
	b := open(t, s.URL("ttl=1s&replicas=1&replica_timeout=20ms"))
	for _, kind := range []string{"mutex", "rwmutex", "semaphore"} {
		l := lockerOf(t, b, kind, "unacked")
		if _, err := l.lock(context.Background()); !errors.Is(err, ErrNotReplicated) {
			t.Fatalf("%s Lock: %v, want ErrNotReplicated", kind, err)
		}
		if _, err := l.try(context.Background()); !errors.Is(err, ErrNotReplicated) {
			t.Fatalf("%s TryLock: %v, want ErrNotReplicated", kind, err)
		}
	}
	if _, err := rwmutex(t, b, "unacked-read").RLock(context.Background()); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("RLock: %v, want ErrNotReplicated", err)
	}
	if _, err := lockerOf(t, open(t, s.URL("ttl=1s")), "rwmutex", "unacked-read").try(context.Background()); err != nil {
		t.Fatalf("TryLock after the refused RLock: %v", err)
	}
	// Nothing was left held: a client without the option is granted each.
	plain := open(t, s.URL("ttl=1s"))
	for _, kind := range []string{"mutex", "rwmutex", "semaphore"} {
		if _, err := lockerOf(t, plain, kind, "unacked").try(context.Background()); err != nil {
			t.Fatalf("%s after the refused grants: %v", kind, err)
		}
	}
}

// startReplica starts a replica of master and waits until WAIT counts it:
// a write of master is acknowledged (a replica is listed online a moment
// before its first acknowledgement).
func startReplica(t testing.TB, master *server) *server {
	c := master.Client()
	ctx := context.Background()
	// The first full sync starts at once rather than after 5 s.
	if err := c.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
		t.Fatal(err)
	}
	r := redistest.New(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port))
	r.Start()
	t.Cleanup(r.Kill)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int64
		err := c.Set(ctx, "test:replica-sync", "1", 0).Err()
		if err == nil {
			n, err = c.Do(ctx, "wait", 1, 100).Int64()
		}
		if err == nil && n == 1 {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica not acknowledging: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReplicaRenewalUnacknowledged: a hold whose renewals the replica does
// not acknowledge (it is stopped) is lost before its lease could expire
// on the master, which the unacknowledged renewals extended.
func TestReplicaRenewalUnacknowledged(t *testing.T) {
	m := redistest.Start(t)
	r := startReplica(t, m)
	const ttl = time.Second
	mu := mutex(t, open(t, m.URL("ttl=1s&replicas=1&replica_timeout=150ms")), "renew-unacked")
	h, err := mu.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	r.Signal(syscall.SIGSTOP)
	defer r.Signal(syscall.SIGCONT)
	select {
	case <-h.Lost():
	case <-time.After(3 * ttl):
		t.Fatal("Loss did not fire while renewals were not acknowledged")
	}
	if d := time.Since(stopped); d > ttl {
		t.Fatalf("Loss fired %v after the replica stopped, past the TTL", d)
	}
	if !errors.Is(h.Err(), baton.ErrLost) {
		t.Fatalf("Err %v, want ErrLost", h.Err())
	}
	// The master still has the hold: its lease runs past the holder's.
	if n, err := m.Client().Exists(context.Background(), mutexKeys(DefaultPrefix, "renew-unacked")[0]).Result(); err != nil || n != 1 {
		t.Fatalf("hold key on the master when the Loss fired: %d %v", n, err)
	}
}

// TestReplicaHandoffUnacknowledged: a waiter handed the lock by a release
// while the replica does not acknowledge (it is stopped) is not told it
// holds: the release's write is not replicated, so its Lock fails with
// ErrNotReplicated, for the Mutex and the Semaphore alike.
func TestReplicaHandoffUnacknowledged(t *testing.T) {
	m := redistest.Start(t)
	r := startReplica(t, m)
	// The timeout is long enough for the first Lock's write to be
	// acknowledged on a loaded machine.
	url := m.URL("ttl=6s&replicas=1&replica_timeout=1s")
	for _, kind := range []string{"mutex", "semaphore"} {
		a := lockerOf(t, open(t, url), kind, "handoff-unacked-"+kind)
		b := lockerOf(t, open(t, url), kind, "handoff-unacked-"+kind)
		if _, err := a.lock(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			_, err := b.lock(context.Background())
			got <- err
		}()
		time.Sleep(200 * time.Millisecond) // b queues on the server
		r.Signal(syscall.SIGSTOP)
		if err := a.unlock(context.Background()); err != nil {
			r.Signal(syscall.SIGCONT)
			t.Fatal(err)
		}
		err := <-got
		r.Signal(syscall.SIGCONT)
		if !errors.Is(err, ErrNotReplicated) {
			t.Fatalf("%s: waiter handed the lock while the replica was stopped: %v, want ErrNotReplicated", kind, err)
		}
	}
}
