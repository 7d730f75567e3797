package etcdlock

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// testQueueMixedVersions: processes of the earlier format (v1Queue) and
// of this one share a queue. The earlier format's Puts keep being served;
// its claimant never sees a j/ record and claims the earlier records under
// the same claim keys as this format, so a job has one live claimant; all
// jobs are claimed once, oldest first, with tokens that grow across both;
// ids stay distinct; uniqueness keys hold across both.
func testQueueMixedVersions(t *testing.T, c *cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, b1 := fast(t, c, "qmixed/")
	_, b2 := fast(t, c, "qmixed/")
	old := newV1Queue(b1, "jobs")
	defer old.d.Close()
	nq := must(b2.OpenQueue(ctx, "jobs")).get(t).(*queueDriver)
	defer nq.Close()
	job := func(p, key string) driver.PutJob {
		return driver.PutJob{Payload: []byte(p), Key: key, MaxAttempts: 5}
	}
	type putter interface {
		Put(context.Context, []driver.PutJob) ([]uint64, error)
	}
	put := func(q putter, jobs ...driver.PutJob) []uint64 {
		t.Helper()
		return must(q.Put(ctx, jobs)).get(t)
	}
	a := put(old, job("a", ""))[0] // before any Put of this format
	b := put(nq, job("b", ""))[0]
	cj := put(old, job("c", ""))[0]
	d := put(nq, job("d1", ""), job("d2", ""))
	e := put(old, job("e", ""))[0]
	ids := []uint64{a, b, cj, d[0], d[1], e}
	if s := slices.Clone(ids); len(slices.Compact(func() []uint64 { slices.Sort(s); return s }())) != len(ids) {
		t.Fatalf("ids %v are not distinct", ids)
	}
	if !(a < b && b < d[0] && d[0] < d[1]) {
		t.Errorf("ids a %d, b %d, d %v: want them in the order of the Puts", a, b, d)
	}
	if cj <= d[1] || e <= cj {
		t.Errorf("earlier format's ids after this format's first Put: c %d, e %d; want them above this format's %d", cj, e, d[1])
	}

	var last uint64
	claim := func(name string, f func() ([]driver.Claim, error), want string) driver.Claim {
		t.Helper()
		cs, err := f()
		if err != nil || len(cs) != 1 {
			t.Fatalf("%s claim: %v, %v; want %q", name, cs, err, want)
		}
		cl := cs[0]
		if string(cl.Payload) != want || cl.Token <= last {
			t.Fatalf("%s claim: job %d %q token %d (after %d); want %q", name, cl.ID, cl.Payload, cl.Token, last, want)
		}
		last = cl.Token
		return cl
	}
	newClaim := func() ([]driver.Claim, error) { return nq.Claim(ctx, 1, false) }
	oldClaim := func() ([]driver.Claim, error) { return old.TryClaim(ctx, 1) }
	ca := claim("new", newClaim, "a") // the oldest, an earlier record
	// The earlier claimant passes over a, claimed by this format, and
	// over b, d1 and d2, older but j/ records, which it does not read.
	cc := claim("old", oldClaim, "c")
	ce := claim("old", oldClaim, "e")
	if cs, err := old.TryClaim(ctx, 1); !errors.Is(err, baton.ErrEmpty) {
		t.Fatalf("old claim with only j/ records unclaimed: %v, %v; want ErrEmpty", cs, err)
	}
	cb := claim("new", newClaim, "b")
	cd1 := claim("new", newClaim, "d1")
	cd2 := claim("new", newClaim, "d2")
	for k, cl := range map[string]driver.Claim{"a": ca, "b": cb, "c": cc, "d1": cd1, "d2": cd2, "e": ce} {
		want := map[string]uint64{"a": a, "b": b, "c": cj, "d1": d[0], "d2": d[1], "e": e}[k]
		if cl.ID != want {
			t.Errorf("job %s claimed as id %d, put as %d", k, cl.ID, want)
		}
	}
	if _, err := nq.Claim(ctx, 1, false); !errors.Is(err, baton.ErrEmpty) {
		t.Errorf("new claim of a queue with every job claimed: %v", err)
	}
	// A j/ job given back is named by its id, which both read alike.
	if err := nq.Retry(ctx, cb, time.Time{}, "again"); err != nil {
		t.Fatal(err)
	}
	cb2 := claim("old", oldClaim, "b")
	if cb2.ID != b || cb2.Attempt != 2 {
		t.Errorf("b given back, claimed by the earlier format: id %d attempt %d; want %d, 2", cb2.ID, cb2.Attempt, b)
	}
	for _, cl := range []driver.Claim{ca, cd1, cd2} {
		if err := nq.Ack(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	for _, cl := range []driver.Claim{cc, ce, cb2} {
		if err := old.d.Ack(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}

	// Uniqueness keys of either format.
	k := put(old, job("k", "K"))[0]
	if got := put(nq, job("k again", "K"))[0]; got != k {
		t.Errorf("this format's Put of a key the earlier one holds: id %d, want %d", got, k)
	}
	l := put(nq, job("l", "L"))[0]
	put(old, job("l again", "L")) // its id is unknown to the earlier format until l's first claim
	if st := must(nq.Stats(ctx)).get(t); st != (driver.QueueStats{Ready: 2}) {
		t.Fatalf("after Puts of two held keys: %+v, want the 2 jobs first put", st)
	}
	ck := claim("new", newClaim, "k")
	cl := claim("new", newClaim, "l")
	if got := put(old, job("l third", "L"))[0]; got != l {
		t.Errorf("the earlier format's Put of a key held by a claimed job of this format: id %d, want %d", got, l)
	}
	for _, c := range []driver.Claim{ck, cl} {
		if err := nq.Ack(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if st := must(nq.Stats(ctx)).get(t); st != (driver.QueueStats{}) {
		t.Errorf("after every Ack: %+v", st)
	}
	if got := put(old, job("l new", "L"))[0]; got == l {
		t.Errorf("the key of an acked job is still held")
	}
}
