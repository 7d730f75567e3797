package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/locktest"
)

// A failover round: a holder on a client of its own is cut off from the
// server (its client closes, so its renewals stop and nothing revokes its
// lease, as when its process is killed, while it lives on to report its
// loss), and a waiter of another client takes the lock.

const failoverTTL = 2 * time.Second // the recipe benchmarks' lease

// failover is what one round saw, on this process's monotonic clock.
type failover struct {
	held        time.Time // the holder's Lock returned
	lastRenewal time.Time // its last renewal (or grant) of the lease was sent
	cut         time.Time // its client closed
	expLo       time.Time // the lease's expiry on the server is in [expLo, expHi]
	expHi       time.Time
	deleted     time.Time // a watch saw the holder's key deleted
	deadline    time.Time // the holder's lease's local deadline, when its Err reports the loss
	lost        time.Time // the holder's Lost closed
	errAtGrant  error     // the holder's Err just after the waiter's Lock returned
	granted     time.Time // the waiter's Lock returned
	released    time.Time // the waiter's Unlock was called
	holdTok     baton.Token
	waitTok     baton.Token
	leaseTTL    time.Duration // the TTL the server granted the holder's lease
}

// runFailover runs one round on name: the holder locks startAfter from
// now, and is cut off cutAfter after the waiter queued behind it. wm is the waiter's handle, obs a
// client that watches the holder's key and, with place, asks the server
// about its lease until it expires (expLo, expHi). The holder's Backend is
// closed in bg: its Close waits for requests of the closed client to time
// out.
func runFailover(ctx context.Context, c *cluster, obs *clientv3.Client, wm baton.Mutex, prefix, name string, startAfter, cutAfter time.Duration, place bool, bg *sync.WaitGroup) (f failover, err error) {
	hc, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return f, err
	}
	defer hc.Close()
	o, err := buildOptions([]lease.Option{lease.WithTTL(failoverTTL), lease.WithPrefix(prefix), lease.WithRequestTimeout(time.Second), lease.WithLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return f, err
	}
	hd := newBackend(hc, false, o)
	hb := baton.NewBackend(hd)
	defer bg.Go(func() { _ = hb.Close() }) // the lease is gone by then: its error says so
	hm, err := hb.Mutex(ctx, name)
	if err != nil {
		return f, err
	}
	time.Sleep(startAfter)
	hold, err := hm.Lock(ctx)
	if err != nil {
		return f, err
	}
	f.held, f.holdTok = time.Now(), hold.Token()
	s := hd.cur.Load()
	ttl, err := obs.TimeToLive(ctx, s.id)
	if err != nil {
		return f, err
	}
	f.leaseTTL = time.Duration(ttl.GrantedTTL) * time.Second
	qdir := hd.dir(baton.KindMutex, name) + "q/"
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := obs.Watch(wctx, qdir+s.hexd+"-", clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
	if wr := <-wch; !wr.Created {
		return f, fmt.Errorf("watch not created: %v", wr.Err())
	}
	type res struct {
		h   baton.Hold
		at  time.Time
		err error
	}
	got := make(chan res, 1)
	go func() {
		h, err := wm.Lock(ctx)
		got <- res{h, time.Now(), err}
	}()
	for {
		resp, err := obs.Get(ctx, qdir, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return f, err
		}
		if resp.Count >= 2 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(cutAfter)
	_ = hc.Close()
	f.cut = time.Now()

	lost := make(chan time.Time, 1)
	go func() { <-hold.Lost(); lost <- time.Now() }()
	type span struct {
		lo, hi time.Time
		err    error
	}
	exp := make(chan span, 1)
	go func() {
		if !place {
			exp <- span{}
			return
		}
		lo, hi, err := expiry(ctx, obs, s.id)
		exp <- span{lo, hi, err}
	}()
	for wr := range wch {
		if len(wr.Events) > 0 {
			f.deleted = time.Now()
			break
		}
	}
	r := <-got
	if r.err != nil {
		return f, fmt.Errorf("waiter: %w", r.err)
	}
	f.granted, f.waitTok = r.at, r.h.Token()
	f.errAtGrant = hold.Err()
	f.released = time.Now()
	if err := wm.Unlock(ctx); err != nil {
		return f, fmt.Errorf("waiter's unlock: %w", err)
	}
	f.lost = <-lost
	// The session has ended: its deadline is the last renewal's that got
	// an answer (sent a TTL less the drift before it).
	f.deadline = s.ls.Deadline()
	f.lastRenewal = f.deadline.Add(hd.o.drift - f.leaseTTL)
	e := <-exp
	f.expLo, f.expHi = e.lo, e.hi
	return f, e.err
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// expiry places the server's expiry of lease id by the server's own
// TimeToLive answers, which count the whole seconds left, rounded toward
// zero: an answer of k ≥ 1 was computed at least k seconds before the
// expiry, an answer of 0 (or -1, lease gone) less than a second before it.
// It asks every 5 ms until the answer is 0 or less.
func expiry(ctx context.Context, c *clientv3.Client, id clientv3.LeaseID) (lo, hi time.Time, err error) {
	for {
		sent := time.Now()
		resp, err := c.TimeToLive(ctx, id)
		if err != nil {
			return lo, hi, err
		}
		if resp.TTL <= 0 {
			if lo.IsZero() {
				return lo, hi, errors.New("the lease had less than a second left at the first answer")
			}
			return lo, time.Now().Add(time.Second), nil
		}
		lo = sent.Add(time.Duration(resp.TTL) * time.Second)
		time.Sleep(5 * time.Millisecond)
	}
}

// recs turns rounds into a history: the holder's hold lasts from its Lock
// until it is no longer trusted (its Err reports the loss from the
// deadline on, and Lost closes when the session's timer runs: whichever
// comes first), the waiter's from its Lock to its Unlock.
func recs(fs []failover) []locktest.Rec {
	var base time.Time
	for _, f := range fs {
		if base.IsZero() || f.held.Before(base) {
			base = f.held
		}
	}
	ns := func(t time.Time) int64 { return int64(t.Sub(base)) }
	var rs []locktest.Rec
	for _, f := range fs {
		rs = append(rs,
			locktest.Rec{Start: ns(f.held), End: ns(minTime(f.lost, f.deadline)), Exclusive: true, Token: uint64(f.holdTok), N: 1, Who: "cut-off holder"},
			locktest.Rec{Start: ns(f.granted), End: ns(f.released), Exclusive: true, Token: uint64(f.waitTok), N: 1, Who: "waiter"})
	}
	return rs
}

// A holder cut off from the server at any point of its renewal period
// reports the loss of its hold before the server lets a waiter of another
// client hold: several rounds at once, each on a name of its own, checked
// as a history.
func testCutOffHolder(t *testing.T, c *cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const rounds = 6
	renewal := failoverTTL / lease.DefaultRenewDivisor
	cl := c.client(t)
	var wg, bg sync.WaitGroup
	defer bg.Wait()
	fs := make([]failover, rounds)
	errs := make([]error, rounds)
	for i := range rounds {
		wb := must(New(cl, lease.WithTTL(failoverTTL), lease.WithPrefix("cutoff"))).get(t)
		t.Cleanup(func() { wb.Close() })
		name := fmt.Sprintf("m%d", i)
		wm := must(wb.Mutex(ctx, name)).get(t)
		cutAfter := renewal * time.Duration(i) / rounds
		wg.Go(func() { fs[i], errs[i] = runFailover(ctx, c, cl, wm, "cutoff", name, 0, cutAfter, false, &bg) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	for i, f := range fs {
		for _, err := range locktest.Check(recs(fs[i:i+1]), 0) {
			t.Errorf("round %d (cut %v after the renewal): %v", i, f.cut.Sub(f.lastRenewal), err)
		}
		if f.errAtGrant == nil {
			t.Errorf("round %d: the holder's Err was nil when the waiter held", i)
		}
		t.Logf("round %d: renewal age at the cut %v, deadline %v and Lost %v before the delete, waiter held %v after the cut",
			i, f.cut.Sub(f.lastRenewal).Round(time.Millisecond), f.deleted.Sub(f.deadline).Round(time.Millisecond),
			f.deleted.Sub(f.lost).Round(time.Millisecond), f.granted.Sub(f.cut).Round(time.Millisecond))
	}
}

// BenchmarkFailover measures where the time from the end of a holder's
// renewals to the next holder goes, on a one-member server with 2 s leases:
//
//	go test -run '^$' -bench Failover -benchtime 20x ./cluster/etcdlock
//
// cut=any cuts the holder off at a random point of its renewal period,
// cut=50ms 50 ms after the waiter queued (before the first renewal, as the
// recipe benchmarks kill their leader). A round starts as soon as the last
// one ended, as in the recipe benchmarks, or, with start=any, after a
// random pause of up to a second, which spreads the expiries over the
// server's loop. Metrics, means over the rounds
// (ms): ms/failover (cut-off to the waiter holding); lease-ttl (granted by
// the server to the holder); age (of the holder's last renewal at the
// cut-off); expiry (cut-off to the lease's expiry on the server, placed by
// its TimeToLive answers to within expiry-err); lessor, lessor-min and
// lessor-max (that expiry to the delete of the holder's key: etcd revokes
// expired leases from a periodic loop); handoff (that delete to the waiter
// holding); lost-lead (the holder's Lost to the waiter holding);
// lost-late-max (the latest Lost after the lease's local deadline, from
// which the hold's Err reports the loss). A round whose holder still
// trusted its hold (Err nil, deadline not passed) when the waiter held
// fails the benchmark.
func BenchmarkFailover(b *testing.B) {
	c := startCluster(b, 1)
	ctx := context.Background()
	cl := c.client(b)
	wb, err := New(cl, lease.WithTTL(failoverTTL), lease.WithPrefix("failover"))
	if err != nil {
		b.Fatal(err)
	}
	defer wb.Close()
	wm, err := wb.Mutex(ctx, "m")
	if err != nil {
		b.Fatal(err)
	}
	renewal := failoverTTL / lease.DefaultRenewDivisor
	anyCut := func() time.Duration { return rand.N(renewal) }
	anyStart := func() time.Duration { return rand.N(time.Second) }
	at := func(d time.Duration) func() time.Duration { return func() time.Duration { return d } }
	b.Run("cut=any,start=any", func(b *testing.B) { benchFailover(b, c, cl, wm, anyStart, anyCut) })
	b.Run("cut=50ms,start=any", func(b *testing.B) { benchFailover(b, c, cl, wm, anyStart, at(50*time.Millisecond)) })
	b.Run("cut=50ms", func(b *testing.B) { benchFailover(b, c, cl, wm, at(0), at(50*time.Millisecond)) })
}

func benchFailover(b *testing.B, c *cluster, cl *clientv3.Client, wm baton.Mutex, startAfter, cutAfter func() time.Duration) {
	ctx := context.Background()
	var fs []failover
	var bg sync.WaitGroup
	defer bg.Wait()
	for range b.N {
		f, err := runFailover(ctx, c, cl, wm, "failover", "m", startAfter(), cutAfter(), true, &bg)
		if err != nil {
			b.Fatal(err)
		}
		if f.errAtGrant == nil || !f.deadline.Before(f.granted) {
			b.Errorf("the holder still trusted its hold when the waiter held: Err %v, deadline %v after", f.errAtGrant, f.deadline.Sub(f.granted))
		}
		fs = append(fs, f)
	}
	b.StopTimer()
	mean := func(d func(f failover) time.Duration) float64 {
		var sum time.Duration
		for _, f := range fs {
			sum += d(f)
		}
		return sum.Seconds() * 1e3 / float64(len(fs))
	}
	ms := func(d time.Duration) float64 { return d.Seconds() * 1e3 }
	mid := func(f failover) time.Time { return f.expLo.Add(f.expHi.Sub(f.expLo) / 2) }
	lessor := make([]time.Duration, len(fs))
	late := make([]time.Duration, len(fs))
	for i, f := range fs {
		lessor[i] = f.deleted.Sub(mid(f))
		late[i] = f.lost.Sub(f.deadline)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(mean(func(f failover) time.Duration { return f.granted.Sub(f.cut) }), "ms/failover")
	b.ReportMetric(mean(func(f failover) time.Duration { return f.leaseTTL }), "lease-ttl-ms")
	b.ReportMetric(mean(func(f failover) time.Duration { return f.cut.Sub(f.lastRenewal) }), "age-ms")
	b.ReportMetric(mean(func(f failover) time.Duration { return mid(f).Sub(f.cut) }), "expiry-ms")
	b.ReportMetric(mean(func(f failover) time.Duration { return f.expHi.Sub(f.expLo) / 2 }), "expiry-err-ms")
	b.ReportMetric(mean(func(f failover) time.Duration { return f.deleted.Sub(mid(f)) }), "lessor-ms")
	b.ReportMetric(ms(slices.Min(lessor)), "lessor-min-ms")
	b.ReportMetric(ms(slices.Max(lessor)), "lessor-max-ms")
	b.ReportMetric(mean(func(f failover) time.Duration { return f.granted.Sub(f.deleted) }), "handoff-ms")
	b.ReportMetric(mean(func(f failover) time.Duration { return f.granted.Sub(f.lost) }), "lost-lead-ms")
	b.ReportMetric(ms(slices.Max(late)), "lost-late-max-ms")
}
