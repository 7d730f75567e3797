package redislock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// oldQueue runs the put, claim and ack scripts of the earlier version
// (testdata/queue-b76bdb0, with that version's key order) on a queue, as a
// process of that version would.
type oldQueue struct {
	t               *testing.T
	c               *redis.Client
	keys            []string
	put, claim, ack *redis.Script
}

func newOldQueue(t *testing.T, c *redis.Client, name string) *oldQueue {
	load := func(n string) *redis.Script {
		b, err := os.ReadFile(filepath.Join("testdata/queue-b76bdb0", n+".lua"))
		if err != nil {
			t.Fatal(err)
		}
		return redis.NewScript(string(b))
	}
	suffixes := []string{"ready", "inflight", "dead", "data", "info", "claim", "uniq", "reason", "delayed", "token", "waiters", "seq", "ids"}
	return &oldQueue{t: t, c: c, keys: nameKeys(redisnode.KeyBase(DefaultPrefix, kjobs, name), suffixes),
		put: load("jobs_put"), claim: load("jobs_claim"), ack: load("jobs_ack")}
}

func (o *oldQueue) Put(key string, delayMS int) string {
	o.t.Helper()
	v, err := o.put.Run(context.Background(), o.c, o.keys, "ch", "old", key, delayMS, 3).StringSlice()
	if err != nil || len(v) != 1 {
		o.t.Fatalf("old put: %v, %v", v, err)
	}
	return v[0]
}

func sid(id baton.JobID) string { return strconv.FormatUint(uint64(id), 10) }

func tokNum(tok string) uint64 {
	n, _ := strconv.ParseUint(tok, 10, 64)
	return n
}

// above reports whether token string tok is above token t.
func above(tok string, t baton.Token) bool { return tokNum(tok) > uint64(t) }

func mustPutKey(t *testing.T, q baton.Queue, key string) baton.JobID {
	t.Helper()
	id, err := q.Put(context.Background(), []byte("new"), baton.UniqueKey(key))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Claim returns id, token and key of the job claimed, or "" for none.
func (o *oldQueue) Claim(ttlMS int) (id, tok, key string) {
	o.t.Helper()
	v, err := o.claim.Run(context.Background(), o.c, o.keys[:11], 1, ttlMS, 0).Slice()
	if err != nil {
		o.t.Fatalf("old claim: %v", err)
	}
	if len(v) != 7 {
		return "", "", ""
	}
	return v[1].(string), v[5].(string), v[6].(string)
}

func (o *oldQueue) Ack(id, tok, key string) bool {
	o.t.Helper()
	n, err := o.ack.Run(context.Background(), o.c, o.keys[:8], id, tok, key).Int64()
	if err != nil {
		o.t.Fatalf("old ack: %v", err)
	}
	return n == 1
}

// TestQueueMixedVersions: processes of the earlier version and of this one
// on one queue during a rolling upgrade. The stored format is the same:
// each takes the other's jobs oldest first, tokens grow across both, a key
// freed by either is free for both, a lapsed claim of either is given back
// by the other's claim (after which the late ack of either is refused), and
// a delayed job put by the earlier version is made ready by this one.
func TestQueueMixedVersions(t *testing.T) {
	s := startRedis(t)
	c := s.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	old := newOldQueue(t, c, "mixed")
	q := queue(t, open(t, s.URL("")), "mixed")

	a := old.Put("", 0)
	b := mustPut(t, q, "new")
	j1, err := q.Claim(ctx)
	if err != nil || sid(j1.ID()) != a {
		t.Fatalf("new claim: %v, %v; want the older job %s", j1, err, a)
	}
	id, tok, _ := old.Claim(60_000)
	if id != sid(b) || !above(tok, j1.Token()) {
		t.Fatalf("old claim: job %s token %s; want job %d, token above %d", id, tok, b, j1.Token())
	}
	if !old.Ack(id, tok, "") {
		t.Fatal("old ack of its claim refused")
	}
	if err := j1.Ack(ctx); err != nil {
		t.Fatal(err)
	}

	// A key put by either and freed by the other's ack.
	k1 := old.Put("k", 0)
	if dup := mustPutKey(t, q, "k"); sid(dup) != k1 {
		t.Fatalf("new put of a pending key: job %d, want %s", dup, k1)
	}
	j2, err := q.Claim(ctx)
	if err != nil || sid(j2.ID()) != k1 {
		t.Fatalf("new claim: %v, %v; want %s", j2, err, k1)
	}
	if err := j2.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	k2 := mustPutKey(t, q, "k")
	if sid(k2) == k1 {
		t.Fatal("the new ack left the key taken")
	}
	id, tok, key := old.Claim(60_000)
	if id != sid(k2) || key != "k" || !old.Ack(id, tok, key) {
		t.Fatalf("old claim and ack of job %d: %s %s %q", k2, id, tok, key)
	}
	if k3 := old.Put("k", 0); k3 == sid(k2) {
		t.Fatal("the old ack left the key taken")
	}
	id, tok, key = old.Claim(60_000)
	if !old.Ack(id, tok, key) {
		t.Fatal("old ack refused")
	}

	// A lapsed old claim, given back by a new claim: the old ack is refused.
	old.Put("", 0)
	id, tok, _ = old.Claim(1)
	time.Sleep(20 * time.Millisecond)
	j3, err := q.TryClaim(ctx)
	if err != nil || sid(j3.ID()) != id || j3.Attempt() != 2 || uint64(j3.Token()) <= tokNum(tok) {
		t.Fatalf("new claim after the old lease passed: %v, %v; want job %s, attempt 2, token above %s", j3, err, id, tok)
	}
	if old.Ack(id, tok, "") {
		t.Fatal("old ack of a claim given back was taken")
	}
	if err := j3.Ack(ctx); err != nil {
		t.Fatal(err)
	}

	// A lapsed new claim, given back by an old claim: the new ack is refused.
	q2 := queue(t, open(t, s.URL("ttl=300ms")), "mixed")
	mustPut(t, q, "new")
	j4, err := q2.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Stop its renewals the way a frozen process would not, by taking the
	// lease away on the server: the inflight deadline is moved to the past.
	if err := c.ZAdd(ctx, redisnodeKey("mixed", "inflight"), redis.Z{Score: 1, Member: sid(j4.ID())}).Err(); err != nil {
		t.Fatal(err)
	}
	id, tok, _ = old.Claim(60_000)
	if id != sid(j4.ID()) || !above(tok, j4.Token()) {
		t.Fatalf("old claim after the new lease passed: job %s token %s, want job %d, token above %d", id, tok, j4.ID(), j4.Token())
	}
	if err := j4.Ack(ctx); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("new ack of a claim given back: %v, want ErrLost", err)
	}
	if !old.Ack(id, tok, "") {
		t.Fatal("old ack refused")
	}

	// A delayed job of the earlier version, made ready by this one.
	d := old.Put("", 1)
	time.Sleep(20 * time.Millisecond)
	j5, err := q.TryClaim(ctx)
	if err != nil || sid(j5.ID()) != d {
		t.Fatalf("new claim of a due delayed job: %v, %v; want %s", j5, err, d)
	}
	if err := j5.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}
