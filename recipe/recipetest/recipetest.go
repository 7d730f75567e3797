// Package recipetest runs the recipes of package recipe against a Backend:
// every Backend's recipes are the same code, and this suite checks them on
// each (mutual exclusion and no deadlock of overlapping multi-locks, loss
// of a part, cancellation, and the helper processes of the cross-process
// tests).
//
// A test package calls Main from TestMain and Run from a test:
//
//	var suite = recipetest.Suite{Name: "redis", Open: open}
//
//	func TestMain(m *testing.M) { recipetest.Main(m, suite) }
//
//	func TestRecipes(t *testing.T) { recipetest.Run(t, suite, url) }
package recipetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/recipe"
)

// Suite describes one backend to the recipe suite.
type Suite struct {
	// Name is unique among the suites of one test binary.
	Name string
	// Open opens the backend that cfg describes, in the test process and
	// in helper processes.
	Open func(cfg string) (baton.Backend, error)
	// Lease: holds are leases, lost when their holder stops renewing.
	Lease bool
	// Failover bounds the time from the SIGKILL of a leader to the
	// election of a waiting candidate of another process: at once on the
	// same host, a TTL plus a handoff on a lease backend.
	Failover time.Duration
	// LossBound bounds the time from the removal of a held lock
	// (baton.Inspector.Remove) to the loss seen by its holder; 0: the
	// loss test is skipped.
	LossBound time.Duration
	// RateStore, if set, opens the backend's own store of the rate limit
	// name (a fast path), which the rate limiter's tests then run on too,
	// and on the Value with the Backend's own store hidden.
	RateStore func(cfg, name string) (recipe.RateStore, error)
}

const (
	envRole = "BATON_RECIPETEST_ROLE" // suite name + "/" + role
	envCfg  = "BATON_RECIPETEST_CFG"
	envArg  = "BATON_RECIPETEST_ARG"
)

// Main runs the tests of a package that uses the suite. In a helper process
// (re-executed by the suite) it runs the helper's role and exits instead.
// After the tests it checks that the goroutines come back to their number
// before them (a recipe's watchers end with what they watch).
func Main(m *testing.M, suites ...Suite) {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(runHelper(role, suites))
	}
	g0 := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > g0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if g := runtime.NumGoroutine(); g > g0 {
			buf := make([]byte, 1<<20)
			fmt.Fprintf(os.Stderr, "recipetest: %d goroutines after the tests, %d before\n%s\n", g, g0, buf[:runtime.Stack(buf, true)])
			code = 1
		}
	}
	os.Exit(code)
}

// Run runs the whole suite for s against the backend at cfg.
func Run(t *testing.T, s Suite, cfg string) {
	e := &env{s: s, cfg: cfg}
	for _, r := range recipes {
		t.Run(r.name, func(t *testing.T) {
			if r.needValue {
				e.needValue(t)
			}
			for _, tc := range r.tests {
				t.Run(tc.name, func(t *testing.T) { tc.fn(t, e) })
			}
		})
	}
}

// recipes lists the tests of the suite by recipe.
var recipes = []struct {
	name string
	// needValue: the recipe keeps its state in a Value; a backend without
	// one refuses it with ErrUnsupported, which is all there is to test.
	needValue bool
	tests     []subtest
}{
	{"MultiLock", false, []subtest{
		{"Order", testMultiOrder},
		{"TryLockAllOrNothing", testMultiTry},
		{"CancelReleases", testMultiCancel},
		{"LostPart", testMultiLost},
		{"Hammer", testMultiHammer},
	}},
	{"Election", true, []subtest{
		{"Handover", testElectionHandover},
		{"ResignTwice", testResignTwice},
		{"Hammer", testElectionHammer},
		{"KillLeader", testKillLeader},
		{"PausedLeader", testPausedLeader},
	}},
	{"Latch", true, []subtest{
		{"Hammer", testLatchHammer},
		{"KillMember", testLatchKill},
		{"Barrier", testBarrier},
	}},
	{"RateLimiter", true, rateTests(rateBackend)},
	{"PermitSemaphore", true, []subtest{
		{"BadInput", testPermitBadInput},
		{"Release", testPermitRelease},
		{"Expiry", testPermitExpiry},
		{"KillHolder", testPermitKill},
		{"Hammer", testPermitHammer},
	}},
	{"IntervalLock", true, []subtest{
		{"BadInput", testIntervalBadInput},
		{"Once", testIntervalOnce},
		{"AtLeast", testIntervalAtLeast},
		{"AtMost", testIntervalAtMost},
		{"KillHolder", testIntervalKill},
	}},
	{"RateStore", false, rateTests(rateStore)},
	{"RateValue", true, rateTests(rateValue)},
	{"DoubleBarrier", true, []subtest{
		{"BadInput", testDoubleBadInput},
		{"Rounds", testDoubleRounds},
		{"KillInside", testDoubleKillInside},
		{"KillWhileFilling", testDoubleKillFilling},
	}},
}

// subtest is one test of a recipe, by the name it runs under.
type subtest struct {
	name string
	fn   func(*testing.T, *env)
}

// env is one run of the suite.
type env struct {
	s   Suite
	cfg string
}

var seq atomic.Int64

// name returns a name of its own for the test, on every run.
func (e *env) name(t *testing.T) string {
	n := strings.NewReplacer("/", "-", " ", "-", "#", "-").Replace(t.Name())
	return fmt.Sprintf("recipetest/%s/%d-%d", n, os.Getpid(), seq.Add(1))
}

// open opens a Backend closed when the test ends.
func (e *env) open(t testing.TB) baton.Backend {
	t.Helper()
	b, err := e.s.Open(e.cfg)
	return closeAtEnd(t, "open "+e.s.Name, b, err)
}

// needValue skips the test when the backend serves no Value, after
// checking that the recipes then refuse with ErrUnsupported.
func (e *env) needValue(t *testing.T) {
	t.Helper()
	b := e.open(t)
	v, err := b.Value(bg(), e.name(t))
	if err == nil {
		_ = v.Close()
		return
	}
	if !errors.Is(err, baton.ErrUnsupported) {
		t.Fatalf("Value: %v", err)
	}
	if _, err := recipe.NewElection(bg(), b, e.name(t)); !errors.Is(err, baton.ErrUnsupported) {
		t.Errorf("NewElection on a backend without Value: %v, want ErrUnsupported", err)
	}
	t.Skip("the backend serves no Value")
}

func ok(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// closeAtEnd fails the test with what unless err is nil, and closes c (a
// Backend, a recipe) when the test ends.
func closeAtEnd[C interface{ Close() error }](t testing.TB, what string, c C, err error) C {
	t.Helper()
	ok(t, what, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// within runs f and fails the test if it has not returned after d.
func within(t testing.TB, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: still running after %v", what, d)
	}
}

// returns waits up to d for the result of a call made in the background
// (what names it) and fails the test if the call failed or has not
// returned.
func returns(t testing.TB, d time.Duration, what string, res <-chan error) {
	t.Helper()
	select {
	case err := <-res:
		ok(t, what, err)
	case <-time.After(d):
		t.Fatalf("%s: not returned after %v", what, d)
	}
}

func bg() context.Context { return context.Background() }

// ctx20 returns a context that ends after 20 s or with the test, so that a
// lock that is never freed fails the test rather than hanging it.
func ctx20(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(bg(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
