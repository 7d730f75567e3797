package redislock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/queuecheck"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/cluster/internal/redistest"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
	"github.com/redis/go-redis/v9"
)

func queue(t *testing.T, b baton.Backend, name string) baton.Queue {
	t.Helper()
	q, err := b.Queue(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

func mustPut(t *testing.T, q baton.Queue, payload string) baton.JobID {
	t.Helper()
	id, err := q.Put(context.Background(), []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestQueueClaimLostBeforeReclaim: a claimant cut off from the server
// cannot renew its claim; its Lost fires before the server gives the job
// to another claimant, whose token the fenced resource then prefers.
func TestQueueClaimLostBeforeReclaim(t *testing.T) {
	s := startRedis(t)
	p := startProxy(t, s.Addr())
	q1 := queue(t, open(t, "redis://"+p.l.Addr().String()+"?ttl=1s&max_retries=0"), "cut")
	q2 := queue(t, open(t, s.URL("ttl=1s")), "cut")
	mustPut(t, q2, "job")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	j1, err := q1.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.cutAll()
	got := make(chan *baton.Job, 1)
	go func() {
		j, err := q2.Claim(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- j
	}()
	var lostAt time.Time
	select {
	case <-j1.Lost():
		lostAt = time.Now()
	case j2 := <-got:
		t.Fatalf("job given to another claimant (token %d) before the cut-off claim was lost", j2.Token())
	}
	j2 := <-got
	if j2 == nil {
		return
	}
	t.Logf("claim lost %v before the job was claimed again", time.Since(lostAt))
	if j2.ID() != j1.ID() || j2.Attempt() != 2 || j2.Token() <= j1.Token() {
		t.Fatalf("reclaimed job: id %d attempt %d token %d; first claim id %d token %d", j2.ID(), j2.Attempt(), j2.Token(), j1.ID(), j1.Token())
	}
	if err := j1.Ack(ctx); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("Ack of the lost claim: %v, want ErrLost", err)
	}
	if err := j2.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestQueueTokensAfterDataLoss: the token counter survives the queue
// draining, and a server that lost its data (FLUSHALL) gives tokens above
// those it gave before (the counter restarts at the server's clock).
func TestQueueTokensAfterDataLoss(t *testing.T) {
	s := startRedis(t)
	q := queue(t, open(t, s.URL("ttl=2s")), "tokens")
	ctx := context.Background()
	var last baton.Token
	for round := range 3 {
		mustPut(t, q, "x")
		j, err := q.TryClaim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if j.Token() <= last {
			t.Fatalf("round %d: token %d after %d", round, j.Token(), last)
		}
		last = j.Token()
		if err := j.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		if round == 1 {
			if err := s.Client().FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestQueueBatchBytes: a batch of more payload than one script takes is
// refused before anything is put.
func TestQueueBatchBytes(t *testing.T) {
	s := startRedis(t)
	q := queue(t, open(t, s.URL("")), "big")
	big := make([]byte, MaxQueuePayload)
	specs := make([]baton.JobSpec, maxBatchBytes/MaxQueuePayload+1)
	for i := range specs {
		specs[i].Payload = big
	}
	if _, err := q.PutBatch(context.Background(), specs); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Fatalf("PutBatch of %d MiB: %v, want ErrInvalidArgument", len(specs), err)
	}
	if st, err := q.Stats(context.Background()); err != nil || st != (baton.QueueStats{}) {
		t.Fatalf("after the refused batch: %+v %v", st, err)
	}
	if _, err := q.PutBatch(context.Background(), specs[1:]); err != nil {
		t.Fatalf("PutBatch of %d MiB: %v", len(specs)-1, err)
	}
}

// TestQueueReplicas: with replicas=1, puts, claims and acks wait for the
// replica; without a replica acknowledging, a Put reports
// ErrNotReplicated, and a Claim too, having given its job back.
func TestQueueReplicas(t *testing.T) {
	m := redistest.Start(t)
	r := startReplica(t, m)
	ctx := context.Background()
	q := queue(t, open(t, m.URL("ttl=2s&replicas=1&replica_timeout=300ms")), "replicated")
	mustPut(t, q, "a")
	j, err := q.TryClaim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Client().HLen(ctx, redisnodeKey("replicated", "data")).Result(); err != nil || n != 0 {
		t.Fatalf("replica's job hash after the Ack: %d %v", n, err)
	}
	plain := queue(t, open(t, m.URL("ttl=2s")), "replicated")
	mustPut(t, plain, "b")
	r.Kill()
	lone := queue(t, open(t, m.URL("ttl=2s&replicas=1&replica_timeout=20ms")), "replicated")
	if _, err := lone.TryClaim(ctx); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("TryClaim without the replica: %v, want ErrNotReplicated", err)
	}
	if _, err := lone.Put(ctx, []byte("c")); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("Put without the replica: %v, want ErrNotReplicated", err)
	}
	j, err = plain.TryClaim(ctx)
	if err != nil || string(j.Payload()) != "b" || j.Attempt() != 2 {
		t.Fatalf("the job the refused claim gave back: %v %v", j, err)
	}
}

// TestQueueInspector: the checks every backend's queue inspection passes
// (counts by state, the oldest ready job's age, claims, removal).
func TestQueueInspector(t *testing.T) {
	s := startRedis(t)
	queuecheck.Inspector(t, open(t, s.URL("")), fmt.Sprint("checked-", time.Now().UnixNano()))
}

// TestQueueUntimedSequences: a queue whose jobs were put in line before
// sequences said since when (small counts) keeps its order, the new jobs
// behind the old, and shows no age while an old one is first in line.
func TestQueueUntimedSequences(t *testing.T) {
	s := startRedis(t)
	c := s.Client()
	b := open(t, s.URL(""))
	const name = "untimed/q"
	q := queue(t, b, name)
	ctx := context.Background()
	old := mustPut(t, q, "old")
	// As such a queue holds them: the job third in line, the counter at 3.
	if err := c.ZAdd(ctx, redisnodeKey(name, "ready"), redis.Z{Score: 3, Member: fmt.Sprint(old)}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, redisnodeKey(name, "seq"), "3", 0).Err(); err != nil {
		t.Fatal(err)
	}
	mustPut(t, q, "new")
	in := b.(baton.Inspector)
	info, err := in.Inspect(ctx, baton.KindQueue, name)
	if err != nil || info.Detail != "ready 2, delayed 0, in flight 0, dead 0" {
		t.Fatalf("Inspect with an untimed job first: %+v, %v; want the counts and no age", info, err)
	}
	for _, want := range []string{"old", "new"} {
		j, err := q.TryClaim(ctx)
		if err != nil || string(j.Payload()) != want {
			t.Fatalf("claimed %v, %v; want %q", j, err, want)
		}
		if err := j.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func redisnodeKey(name, suffix string) string {
	return nameKeys(fmt.Sprintf("%sjobs:{%s}:", DefaultPrefix, name), []string{suffix})[0]
}

// TestQueueSentinel: a queue through a Sentinel failover client — a
// blocked claimant woken by a Put, a delayed job, an Ack.
func TestQueueSentinel(t *testing.T) {
	m := redistest.Start(t)
	port := redistest.FreePort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor mymaster 127.0.0.1 %d 1\n", port, dir, m.Port)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("redis-server", conf, "--sentinel")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := "redis+sentinel://127.0.0.1:" + strconv.Itoa(port) + "/mymaster?ttl=2s"
	var b baton.Backend
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var err error
		if b, err = OpenURL(context.Background(), url); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Sentinel: %v", err)
		}
	}
	t.Cleanup(func() { b.Close() })
	q := queue(t, b, "sentinel")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan *baton.Job, 1)
	go func() {
		j, err := q.Claim(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- j
	}()
	time.Sleep(50 * time.Millisecond)
	mustPut(t, q, "woken")
	if j := <-got; j == nil || string(j.Payload()) != "woken" || j.Ack(ctx) != nil {
		t.Fatalf("blocked claimant got %v", j)
	}
	if _, err := q.Put(ctx, []byte("later"), baton.Delay(200*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	j, err := q.Claim(ctx)
	if err != nil || string(j.Payload()) != "later" || time.Since(t0) < 150*time.Millisecond {
		t.Fatalf("delayed job: %v %v after %v", j, err, time.Since(t0))
	}
	if err := j.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestQueueRestartAppendOnly: a server with appendonly and appendfsync
// always, killed and restarted, keeps the queue: its ready jobs, the claim
// in flight (renewed again once the server is back, then acked), and its
// token counter.
func TestQueueRestartAppendOnly(t *testing.T) {
	s := startRedis(t, "--appendonly", "yes", "--appendfsync", "always")
	ctx := context.Background()
	q := queue(t, open(t, s.URL("ttl=3s")), "aof")
	for _, p := range []string{"a", "b", "c"} {
		mustPut(t, q, p)
	}
	j, err := q.TryClaim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Restart()
	q2 := queue(t, open(t, s.URL("ttl=3s")), "aof")
	wantStats := baton.QueueStats{Ready: 2, InFlight: 1}
	if st, err := q2.Stats(ctx); err != nil || st != wantStats {
		t.Fatalf("after the restart: %+v %v, want %+v", st, err, wantStats)
	}
	j2, err := q2.TryClaim(ctx)
	if err != nil || string(j2.Payload()) != "b" || j2.Token() <= j.Token() {
		t.Fatalf("claim after the restart: %v %v", j2, err)
	}
	time.Sleep(2 * time.Second) // past renewals, some of them while the server was down
	if err := j.Ack(ctx); err != nil {
		t.Fatalf("Ack of the claim made before the restart: %v", err)
	}
	if err := j2.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestQueueInspect: a queue is listed and inspected (claims as holders,
// counts in Detail) and removed, which loses its claims.
func TestQueueInspect(t *testing.T) {
	s := startRedis(t)
	b := open(t, s.URL("ttl=1s"))
	q := queue(t, b, "inspected/q")
	ctx := context.Background()
	mustPut(t, q, "a")
	mustPut(t, q, "b")
	j, err := q.TryClaim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	in := b.(baton.Inspector)
	info, err := in.Inspect(ctx, baton.KindQueue, "inspected/q")
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != baton.KindQueue || len(info.Holders) != 1 || info.Holders[0].Token != j.Token() ||
		info.Holders[0].TTL <= 0 || info.LastToken != j.Token() || !strings.HasPrefix(info.Detail, "ready 1, delayed 0, in flight 1, dead 0, oldest ready ") {
		t.Fatalf("Inspect = %+v", info)
	}
	all, err := in.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, i := range all {
		found = found || i.Kind == baton.KindQueue && i.Name == "inspected/q"
	}
	if !found {
		t.Fatalf("List = %+v: no queue", all)
	}
	if err := in.Remove(ctx, baton.KindQueue, "inspected/q"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-j.Lost():
	case <-time.After(3 * time.Second):
		t.Fatal("the claim of a removed queue was not lost")
	}
	if _, err := in.Inspect(ctx, baton.KindQueue, "inspected/q"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Inspect after Remove: %v", err)
	}
}

// TestQueueKeeperStartsWhenDue: a claim starts no keeper (no timers) until
// its first renewal is due; the handle's timer then starts it, and it
// renews the lease past its TTL; an ack before that ends the claim without
// one.
func TestQueueKeeperStartsWhenDue(t *testing.T) {
	s := startRedis(t)
	c := s.Client()
	d, err := newDriver(c, []lease.Option{lease.WithTTL(600 * time.Millisecond), lease.WithRenewEvery(200 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ctx := context.Background()
	dq, err := d.OpenQueue(ctx, "keeper")
	if err != nil {
		t.Fatal(err)
	}
	q := dq.(*queueDriver)
	t.Cleanup(func() { q.Close() })
	claim := func() (driver.Claim, *jobClaim) {
		t.Helper()
		if _, err := q.Put(ctx, []driver.PutJob{{Payload: []byte("job"), MaxAttempts: 1}}); err != nil {
			t.Fatal(err)
		}
		cs, err := q.Claim(ctx, 1, false)
		if err != nil || len(cs) != 1 {
			t.Fatal(cs, err)
		}
		return cs[0], cs[0].Data.(*jobClaim)
	}
	keeper := func(jc *jobClaim) *lease.Keeper {
		q.mu.Lock()
		defer q.mu.Unlock()
		return jc.keeper
	}
	early, ejc := claim()
	if keeper(ejc) != nil {
		t.Fatal("a keeper started with the claim")
	}
	if err := q.Ack(ctx, early); err != nil {
		t.Fatal(err)
	}
	if ejc.loss.Err() != nil {
		t.Fatalf("claim acked before its first renewal: loss %v", ejc.loss.Err())
	}

	late, jc := claim()
	if keeper(jc) != nil {
		t.Fatal("a keeper started with the claim")
	}
	// Past three TTLs the lease lives only if the keeper renewed it.
	time.Sleep(1800 * time.Millisecond)
	if keeper(jc) == nil {
		t.Fatal("no keeper started once the first renewal was due")
	}
	if err := jc.loss.Err(); err != nil {
		t.Fatalf("claim held past its TTL: %v", err)
	}
	if err := q.Ack(ctx, late); err != nil {
		t.Fatalf("Ack after renewals: %v", err)
	}
}

// TestQueueScriptsGivenFewerKeys: the ack and claim scripts, given only
// the first jobsKeysAck and jobsKeysClaim keys of the queue, still do their
// work: the ack ends its claim and gives back no lapsed claim (it reads no
// clock), and the claim gives back the lapsed claims (to the line, or dead
// on their last attempt) and makes due delayed jobs ready: every key those
// paths touch comes first.
func TestQueueScriptsGivenFewerKeys(t *testing.T) {
	s := startRedis(t)
	c := s.Client()
	ctx := context.Background()
	keys := nameKeys(redisnode.KeyBase(DefaultPrefix, kjobs, "fewer"), jobsSuffixes)
	putKeys := nameKeys(redisnode.KeyBase(DefaultPrefix, kjobs, "fewer"), jobsPutKeys)
	put := func(delay, maxAttempts int) {
		t.Helper()
		if err := scriptJobsPut.Run(ctx, c, putKeys, "ch", "job", "", delay, maxAttempts).Err(); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(ttl int) []any {
		t.Helper()
		v, err := scriptJobsClaim.Run(ctx, c, keys[:jobsKeysClaim], 1, ttl, 0).Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	put(0, 1)
	put(0, 1)
	put(0, 2)
	kept := claim(60_000)
	claim(1) // its last attempt: dead when its lease lapses
	claim(1) // given back to the line
	put(1, 1)
	time.Sleep(20 * time.Millisecond)
	n, err := scriptJobsAck.Run(ctx, c, keys[:jobsKeysAck], kept[1], kept[4]).Int64()
	if err != nil || n != 1 {
		t.Fatalf("ack with %d keys: %v, %v", jobsKeysAck, n, err)
	}
	counts := func(when string, ready, inflight, dead int64) {
		t.Helper()
		for _, k := range []struct {
			suffix string
			want   int64
		}{{"ready", ready}, {"inflight", inflight}, {"dead", dead}} {
			if n, err := c.ZCard(ctx, redisnodeKey("fewer", k.suffix)).Result(); err != nil || n != k.want {
				t.Errorf("%s: %s holds %d (%v), want %d", when, k.suffix, n, err, k.want)
			}
		}
	}
	// The lapsed claim of job 3 is still there (a claim may have given
	// back job 2's meanwhile), and the delayed job still delayed.
	if err := c.ZScore(ctx, redisnodeKey("fewer", "inflight"), "3").Err(); err != nil {
		t.Errorf("after the ack: the lapsed claim of job 3 is not in flight: %v", err)
	}
	if n, err := c.ZCard(ctx, redisnodeKey("fewer", "ready")).Result(); err != nil || n != 0 {
		t.Errorf("after the ack: ready holds %d (%v), want 0", n, err)
	}
	// The job given back first, then the delayed job, due and made ready.
	for i, id := range []string{"3", "4"} {
		if v := claim(60_000); len(v) != 5 || v[1] != id {
			t.Fatalf("claim with %d keys: %v, want job %s", jobsKeysClaim, v, id)
		}
		if i == 0 {
			counts("after the claim gave back the lapsed claims", 1, 1, 1)
		}
	}
}
