package recipetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/locktest"
	"github.com/batonlock/baton/recipe"
)

func (e *env) election(t testing.TB, b baton.Backend, name string) *recipe.Election {
	t.Helper()
	el, err := recipe.NewElection(bg(), b, name)
	return closeAtEnd(t, "NewElection", el, err)
}

// campaignLater campaigns for value in a goroutine, for a candidate that
// waits behind a leader, and sends the leadership it got (nil when the
// campaign failed, which fails the test).
func campaignLater(t testing.TB, el *recipe.Election, value string) <-chan *recipe.Leadership {
	elected := make(chan *recipe.Leadership, 1)
	go func() {
		l, err := el.Campaign(ctx20(t), []byte(value))
		if err != nil {
			t.Errorf("Campaign %q behind a leader: %v", value, err)
		}
		elected <- l
	}()
	return elected
}

// A candidate waits while another leads, is elected when it resigns, and
// Leader and Observe follow.
func testElectionHandover(t *testing.T, e *env) {
	name := e.name(t)
	e1, e2 := e.election(t, e.open(t), name), e.election(t, e.open(t), name)
	if _, err := e1.Leader(bg()); !errors.Is(err, recipe.ErrNoLeader) {
		t.Fatalf("Leader before any campaign: %v, want ErrNoLeader", err)
	}
	octx, stop := context.WithCancel(bg())
	seen := make(chan recipe.Leader, 16)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(seen)
		for l, err := range e2.Observe(octx) {
			if err != nil {
				t.Errorf("Observe: %v", err)
				return
			}
			seen <- l
		}
	})
	defer func() { stop(); wg.Wait() }()
	if l := <-seen; l.Token != 0 {
		t.Fatalf("Observe first yields %+v, want no leader", l)
	}
	l1, err := e1.Campaign(ctx20(t), []byte("one"))
	ok(t, "Campaign", err)
	got, err := e2.Leader(bg())
	ok(t, "Leader", err)
	if string(got.Value) != "one" || got.Token != l1.Token() {
		t.Fatalf("Leader = %q/%d, want one/%d", got.Value, got.Token, l1.Token())
	}
	elected := campaignLater(t, e2, "two")
	select {
	case <-elected:
		t.Fatal("a second candidate was elected while the first leads")
	case <-time.After(100 * time.Millisecond):
	}
	ok(t, "Proclaim", l1.Proclaim(bg(), []byte("one again")))
	ok(t, "Resign", l1.Resign(bg()))
	l2 := <-elected
	if l2 == nil {
		t.FailNow()
	}
	if l2.Token() <= l1.Token() {
		t.Errorf("token %d of the second leader does not exceed %d", l2.Token(), l1.Token())
	}
	// A replaced leader cannot publish over the new one.
	if err := l1.Proclaim(bg(), []byte("stale")); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Proclaim by the replaced leader: %v, want ErrLost", err)
	}
	// Observe may merge quick changes (a value overwritten before the
	// observer looked again), but its last yield is the current leader:
	// it reaches the second leader, and after its resignation no leader.
	var values []string
	next := func(want func(recipe.Leader) bool) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case l, open := <-seen:
				if !open {
					t.Fatalf("Observe ended; it saw %q", values)
				}
				values = append(values, string(l.Value))
				if want(l) {
					return
				}
			case <-timeout:
				t.Fatalf("Observe saw %q, and then nothing for 10 s", values)
			}
		}
	}
	next(func(l recipe.Leader) bool { return string(l.Value) == "two" && l.Token == l2.Token() })
	ok(t, "Resign", l2.Resign(bg()))
	next(func(l recipe.Leader) bool { return l.Token == 0 })
	if values[0] != "one" && values[0] != "one again" {
		t.Errorf("Observe saw %q: not the first leader first", values)
	}
	if _, err := e1.Leader(bg()); !errors.Is(err, recipe.ErrNoLeader) {
		t.Errorf("Leader after both resigned: %v, want ErrNoLeader", err)
	}
}

// Two terms of one Election (its goroutines campaign on one Mutex handle):
// a second Resign of the first term ends nothing of the second.
func testResignTwice(t *testing.T, e *env) {
	name := e.name(t)
	el, other := e.election(t, e.open(t), name), e.election(t, e.open(t), name)
	l1, err := el.Campaign(ctx20(t), []byte("one"))
	ok(t, "Campaign", err)
	elected := campaignLater(t, el, "two")
	time.Sleep(50 * time.Millisecond)
	ok(t, "Resign", l1.Resign(bg()))
	l2 := <-elected
	if l2 == nil {
		t.FailNow()
	}
	if err := l1.Resign(bg()); !errors.Is(err, baton.ErrNotHeld) {
		t.Errorf("second Resign: %v, want ErrNotHeld", err)
	}
	ctx, cancel := context.WithTimeout(bg(), 200*time.Millisecond)
	defer cancel()
	if l3, err := other.Campaign(ctx, []byte("three")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a third candidate was elected while the second leads: %v", err)
		if err == nil {
			_ = l3.Resign(bg())
		}
	}
	ok(t, "Resign", l2.Resign(bg()))
}

// Many candidates on several Backends: terms never overlap, each leader
// sees itself published during its term, and observers never see the
// published token go back.
func testElectionHammer(t *testing.T, e *env) {
	name := e.name(t)
	bs := []baton.Backend{e.open(t), e.open(t)}
	var hist locktest.History
	deadline := time.Now().Add(2 * time.Second)
	var terms, cancelled atomic.Int64
	octx, stop := context.WithCancel(bg())
	var owg sync.WaitGroup
	for i := range 2 {
		el := e.election(t, bs[i], name)
		owg.Go(func() {
			var last baton.Token
			for l, err := range el.Observe(octx) {
				if err != nil {
					t.Errorf("Observe: %v", err)
					return
				}
				if l.Token != 0 && l.Token < last {
					t.Errorf("Observe went back from token %d to %d", last, l.Token)
				}
				last = max(last, l.Token)
			}
		})
	}
	var wg sync.WaitGroup
	for g := range 6 {
		el := e.election(t, bs[g%2], name)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			me := []byte("g" + strconv.Itoa(g))
			for it := 0; time.Now().Before(deadline) && !t.Failed(); it++ {
				d := 10 * time.Second
				if rng.IntN(5) == 0 {
					d = time.Duration(rng.IntN(2000)) * time.Microsecond
				}
				ctx, cancel := context.WithTimeout(bg(), d)
				l, err := el.Campaign(ctx, me)
				cancel()
				if errors.Is(err, context.DeadlineExceeded) && d < time.Second {
					cancelled.Add(1)
					continue
				}
				if err != nil {
					t.Errorf("Campaign: %v", err)
					return
				}
				start := locktest.Mono()
				cur, err := el.Leader(bg())
				if err != nil || !bytes.Equal(cur.Value, me) || cur.Token != l.Token() {
					t.Errorf("Leader during the term of %s/%d: %q/%d, %v", me, l.Token(), cur.Value, cur.Token, err)
				}
				if err := l.Err(); err != nil {
					t.Errorf("leadership lost: %v", err)
				}
				end := locktest.Mono()
				hist.Add(locktest.Rec{Start: start, End: end, Exclusive: true, Token: uint64(l.Token()), N: 1, Who: fmt.Sprintf("g%d/%d", g, it)})
				if err := l.Resign(bg()); err != nil {
					t.Errorf("Resign: %v", err)
				}
				terms.Add(1)
			}
		})
	}
	wg.Wait()
	stop()
	owg.Wait()
	for _, err := range locktest.Check(hist.Records(), 0) {
		t.Error(err)
	}
	t.Logf("%d terms, %d campaigns cancelled", terms.Load(), cancelled.Load())
}

// roleLeader campaigns on the election named arg, says "leader <token>",
// and then, every 5 ms, "ok <mono>" while its leadership is trusted at
// that instant, and "lost <mono>" once it is not, until killed.
func roleLeader(e *env, arg string) error {
	b, err := e.s.Open(e.cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	el, err := recipe.NewElection(bg(), b, arg)
	if err != nil {
		return err
	}
	defer el.Close()
	l, err := el.Campaign(bg(), []byte(strconv.Itoa(os.Getpid())))
	if err != nil {
		return err
	}
	fmt.Printf("leader %d\n", l.Token())
	for {
		at := locktest.Mono()
		if l.Err() != nil {
			fmt.Printf("lost %d\n", at)
			select {}
		}
		fmt.Printf("ok %d\n", at)
		time.Sleep(5 * time.Millisecond)
	}
}

// failover starts a leader in a helper process, waits until a candidate of
// this process waits, kills the leader and returns the time from the kill
// to the candidate's election.
func (e *env) failover(t testing.TB, el *recipe.Election, name string) (time.Duration, *recipe.Leadership) {
	p := e.spawn(t, "leader", name)
	p.expect(t, "leader", 30*time.Second)
	type res struct {
		l  *recipe.Leadership
		at time.Time
	}
	got := make(chan res, 1)
	go func() {
		l, err := el.Campaign(ctx20(t), []byte("candidate"))
		at := time.Now()
		if err != nil {
			t.Errorf("Campaign: %v", err)
		}
		got <- res{l, at}
	}()
	time.Sleep(50 * time.Millisecond) // the candidate waits
	t0 := time.Now()
	p.kill()
	r := <-got
	if r.l == nil {
		t.FailNow()
	}
	return r.at.Sub(t0), r.l
}

// A leader SIGKILLed in another process is replaced by a waiting candidate
// within the suite's Failover bound (the median of three rounds, so that
// one stall of a loaded machine does not decide).
func testKillLeader(t *testing.T, e *env) {
	name := e.name(t)
	el := e.election(t, e.open(t), name)
	var took []time.Duration
	for range 3 {
		d, l := e.failover(t, el, name)
		took = append(took, d)
		cur, err := el.Leader(bg())
		ok(t, "Leader", err)
		if string(cur.Value) != "candidate" || cur.Token != l.Token() {
			t.Errorf("Leader after the failover: %q/%d, want candidate/%d", cur.Value, cur.Token, l.Token())
		}
		ok(t, "Resign", l.Resign(bg()))
	}
	slices.Sort(took)
	if took[1] > e.s.Failover {
		t.Errorf("leader SIGKILL -> candidate elected: median %v of %v, bound %v", took[1], took, e.s.Failover)
	}
	t.Logf("leader SIGKILL -> candidate elected: %v", took)
}

// A leader paused (SIGSTOP) past its lease while a candidate is elected
// never trusts its leadership after that election: once resumed, its
// first look at Err already reports the loss.
func testPausedLeader(t *testing.T, e *env) {
	if !e.s.Lease {
		t.Skip("holds are not leases")
	}
	name := e.name(t)
	el := e.election(t, e.open(t), name)
	p := e.spawn(t, "leader", name)
	p.expect(t, "leader", 30*time.Second)
	p.expect(t, "ok", 10*time.Second)
	ok(t, "SIGSTOP", pause(p.cmd.Process))
	l, err := el.Campaign(ctx20(t), []byte("candidate"))
	ok(t, "Campaign while the leader is paused", err)
	elected := locktest.Mono()
	ok(t, "SIGCONT", resume(p.cmd.Process))
	for {
		line := ""
		select {
		case line = <-p.lines:
		case <-time.After(10 * time.Second):
			t.Fatal("the resumed leader is silent")
		}
		var what string
		var at int64
		if _, err := fmt.Sscan(line, &what, &at); err != nil {
			t.Fatalf("helper said %q", line)
		}
		if at > elected {
			if what != "lost" {
				t.Fatalf("the old leader trusted its leadership %v after another was elected", time.Duration(at-elected))
			}
			break
		}
	}
	ok(t, "Resign", l.Resign(bg()))
}

// BenchFailover measures the time from the SIGKILL of a leader in another
// process to the election of a candidate that waits in this one, as ns/op.
// The suite's test binary must call Main from TestMain.
func BenchFailover(b *testing.B, s Suite, cfg string) {
	e := &env{s: s, cfg: cfg}
	name := fmt.Sprintf("recipetest/bench/%d", os.Getpid())
	bk, err := s.Open(cfg)
	ok(b, "open", err)
	defer bk.Close()
	el, err := recipe.NewElection(bg(), bk, name)
	ok(b, "NewElection", err)
	defer el.Close()
	var total time.Duration
	b.ResetTimer()
	b.StopTimer()
	for range b.N {
		d, l := e.failover(b, el, name)
		total += d
		ok(b, "Resign", l.Resign(bg()))
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(total.Seconds()*1e3/float64(b.N), "ms/failover")
}
