// Package locktest is the conformance suite that every baton backend runs:
// mutual exclusion across processes (the test binary re-executes itself as
// helper processes), a history checker for overlapping holds, token order and
// permit counts, reentrancy and hold counts, cancellation, fencing, crash of a
// holder, readers and writers, semaphores, condition variables, bad input, and
// a leak check of goroutines and file descriptors.
//
// A backend's test package calls Main from TestMain and Run from a test:
//
//	var suite = locktest.Suite{Name: "file", Open: open, Caps: locktest.Caps{RWMutex: true}}
//
//	func TestMain(m *testing.M) { locktest.Main(m, suite) }
//
//	func TestConformance(t *testing.T) { locktest.Run(t, suite, t.TempDir()) }
package locktest

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// Caps tells the suite what a backend can do and how fast.
type Caps struct {
	RWMutex, Semaphore, Cond bool
	// Value: the backend serves baton.Value (the Value tests run; without
	// it they check that Backend.Value is ErrUnsupported).
	Value bool
	// Queue: the backend serves baton.Queue (the Queue tests run; without
	// it they check that Backend.Queue is ErrUnsupported).
	Queue bool
	// CrossProcess runs the tests that re-execute the test binary.
	CrossProcess bool
	// KillBound: a holder SIGKILLed -> a waiter holds within this; 0 skips
	// the test.
	KillBound time.Duration
	// Acquisitions is the total of the cross-process mutual-exclusion test
	// (0: 20,000).
	Acquisitions int
	// Lease: holds can be lost by expiry (lease backends).
	Lease bool
	// CancelBound: a cancelled waiter returns within this (0: 50 ms).
	CancelBound time.Duration
	// QueueWaiting: the queue's kill test keeps at most this many jobs
	// waiting, putting more as they are done (0: it puts them all first),
	// for a backend whose claims pay for every waiting job.
	QueueWaiting int
}

// Suite describes one backend to the conformance suite.
type Suite struct {
	// Name is unique among the suites of one test binary.
	Name string
	// Open opens the backend that cfg describes. It runs in the test process
	// and in helper processes.
	Open func(cfg string) (baton.Backend, error)
	Caps Caps
	// Objects, when set, lists the backend's objects (files, keys) for cfg;
	// the bad-input tests check that refused calls create none.
	Objects func(cfg string) ([]string, error)
	// KillSession, when set, ends a hold's session on the server (see
	// SessionKiller) for the SessionKilled test.
	KillSession SessionKiller
	// Reclaim, when set, runs the tests of reclaim (reclaim.go).
	Reclaim *Reclaim
	// RunElsewhere names subtests (paths below the suite, such as
	// "Queue/Hammer") that another suite of the same backend in the test
	// binary runs already, as the reason says: a second deployment of one
	// server (a cluster beside a single member) need not repeat the
	// longest load tests of logic it shares. They are skipped with the
	// reason.
	RunElsewhere map[string]string
}

const (
	envHelper = "BATON_LOCKTEST_HELPER" // suite name + "/" + role
	envCfg    = "BATON_LOCKTEST_CFG"
	envArgs   = "BATON_LOCKTEST_ARGS" // JSON of helperArgs
)

// Main runs the tests of a package that uses the suite. In a helper process
// (re-executed by the suite) it runs the helper's role and exits instead.
// Around the tests it checks that goroutines and open file descriptors come
// back to their number before the tests.
func Main(m *testing.M, suites ...Suite) {
	if role := os.Getenv(envHelper); role != "" {
		os.Exit(runHelper(role, suites))
	}
	g0, fd0, fds0 := runtime.NumGoroutine(), openFDs(), fdTargets()
	code := m.Run()
	atExitMu.Lock()
	for i := len(atExit) - 1; i >= 0; i-- {
		atExit[i]()
	}
	atExitMu.Unlock()
	if code == 0 {
		if err := settle(g0, fd0, 5*time.Second, profileFiles()...); err != nil {
			fmt.Fprintf(os.Stderr, "locktest: leak after the tests: %v\nfds before: %q\nfds after: %q\n", err, fds0, fdTargets())
			code = 1
		}
	}
	os.Exit(code)
}

var (
	atExitMu sync.Mutex
	atExit   []func() // guarded by atExitMu until Main runs them
)

// AtExit registers f to run when the tests are done, before Main checks
// for leaks and exits (last registered first): for what a test binary
// keeps for all its tests, such as a server and its data directory.
func AtExit(f func()) {
	atExitMu.Lock()
	defer atExitMu.Unlock()
	atExit = append(atExit, f)
}

// profileFiles returns the absolute paths of the files that the testing
// package opens for -test.cpuprofile and -test.trace and leaves open until
// the process exits.
func profileFiles() []string {
	dir := ""
	if f := flag.Lookup("test.outputdir"); f != nil {
		dir = f.Value.String()
	}
	var out []string
	for _, name := range []string{"test.cpuprofile", "test.trace"} {
		f := flag.Lookup(name)
		if f == nil || f.Value.String() == "" {
			continue
		}
		p := f.Value.String()
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if abs, err := filepath.Abs(p); err == nil {
			out = append(out, abs)
		}
	}
	return out
}

// settle waits until the goroutine and fd counts (the latter leaving out
// fds open on the files in skip) are back to at most g0 and fd0, and
// returns an error describing the excess if they are not by d.
func settle(g0, fd0 int, d time.Duration, skip ...string) error {
	deadline := time.Now().Add(d)
	for {
		g, fd := runtime.NumGoroutine(), openFDs(skip...)
		if g <= g0 && fd <= fd0 {
			return nil
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			return fmt.Errorf("%d goroutines (were %d), %d fds (were %d)\n%s", g, g0, fd, fd0, buf)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Run runs the whole conformance suite for s against the backend at cfg.
func Run(t *testing.T, s Suite, cfg string) {
	t.Helper()
	if s.Caps.Acquisitions == 0 {
		s.Caps.Acquisitions = 20000
	}
	if s.Caps.CancelBound == 0 {
		s.Caps.CancelBound = 50 * time.Millisecond
	}
	e := &env{s: s, cfg: cfg}
	e.run(t, []subtest{
		{"BadInput", testBadInput, true},
		{"MutexBasics", testMutexBasics, true},
		{"Reentrancy", testReentrancy, true},
		{"SharedHandle", testSharedHandle, true},
		{"Cancel", testCancel, true},
		{"Fencing", testFencing, true},
		{"Close", testClose, true},
		{"CloseWhileBusy", testCloseWhileBusy, true},
		{"RWBasics", testRWBasics, s.Caps.RWMutex},
		{"RWWriterNotStarved", testRWWriterNotStarved, s.Caps.RWMutex},
		{"RWLateReaders", testRWLateReaders, s.Caps.RWMutex},
		{"RWOneHandleStream", testRWOneHandleStream, s.Caps.RWMutex},
		{"LockCancelRace", testLockCancelRace, true},
		{"ManyHandles", testManyHandles, true},
		{"CloseWhilePassing", testCloseWhilePassing, true},
		{"Observed", testObserved, true},
		{"HandleMemory", testHandleMemory, true},
		{"SemCancelRace", testSemCancelRace, s.Caps.Semaphore},
		{"SemBasics", testSemBasics, s.Caps.Semaphore},
		{"CondBasics", testCondBasics, s.Caps.Cond},
		{"CondChurn", testCondChurn, s.Caps.Cond},
		{"CrossProcessMutex", testCrossProcessMutex, s.Caps.CrossProcess},
		{"CrossProcessRW", testCrossProcessRW, s.Caps.CrossProcess && s.Caps.RWMutex},
		{"CrossProcessSemaphore", testCrossProcessSem, s.Caps.CrossProcess && s.Caps.Semaphore},
		{"KillHolder", testKillHolder, s.Caps.CrossProcess && s.Caps.KillBound > 0},
		{"SessionKilled", testSessionKilled, s.KillSession != nil},
		{"Value", testValue, true},
		{"Queue", testQueue, true},
		{"ReclaimTokens", testReclaimTokens, s.Reclaim != nil},
		{"ReclaimResidue", testReclaimResidue, s.Reclaim != nil},
		{"ReclaimRace", testReclaimRace, s.Reclaim != nil && s.Caps.CrossProcess},
	}, checkLeaks)
}

// subtest is a test of the suite, run when need is set.
type subtest struct {
	name string
	fn   func(*testing.T, *env)
	need bool
}

// run runs the tests that are needed as subtests of t, each after the
// setups given.
func (e *env) run(t *testing.T, tests []subtest, setup ...func(*testing.T)) {
	for _, tc := range tests {
		if !tc.need {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			for path, why := range e.s.RunElsewhere {
				if strings.HasSuffix(t.Name(), "/"+path) {
					t.Skip(why)
				}
			}
			for _, f := range setup {
				f(t)
			}
			tc.fn(t, e)
		})
	}
}

// checkLeaks fails t, unless it failed already, when its goroutines and
// fds are not back to their number at its start after its cleanups.
func checkLeaks(t *testing.T) {
	g0, fd0 := runtime.NumGoroutine(), openFDs()
	// Registered first, so it runs after the test's own cleanups
	// have closed what it opened.
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		if err := settle(g0, fd0, 5*time.Second); err != nil {
			t.Errorf("leak: %v", err)
		}
	})
}

// env is what the tests share.
type env struct {
	s   Suite
	cfg string
}

// names counts the names given in this process, across suites and runs
// (go test -count): a name is never handed out twice.
var names atomic.Int64

// open opens the backend and closes it when the test ends.
func (e *env) open(t *testing.T) baton.Backend {
	t.Helper()
	b, err := e.s.Open(e.cfg)
	if err != nil {
		t.Fatalf("open backend: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close backend: %v", err)
		}
	})
	return b
}

// name returns a name unused so far in this process.
func (e *env) name(t *testing.T) string {
	n := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return fmt.Sprintf("lt-%d-%d-%s", os.Getpid(), names.Add(1), n)
}

// helperArgs is what a helper process is told to do.
type helperArgs struct {
	Name        string
	Handles     int // handles in the process
	Goroutines  int // goroutines per handle
	Iterations  int // acquisitions per goroutine
	Counter     string
	History     string
	ReadPercent int   // RW: share of reads
	Capacity    int64 // semaphore
	MaxN        int64 // semaphore: largest request
	Kind        string
	HoldFor     time.Duration
	Dir         string        // queue: where workers keep fences and logs
	Window      time.Duration // reclaim: the turn of each name
}

func encodeArgs(a helperArgs) string {
	b, _ := json.Marshal(a)
	return string(b)
}
