// Package chantest is the conformance suite of baton.Channel that every
// backend serving channels runs: sending and receiving, batches and the
// zero-copy forms, bad input and parameter clashes, order per sender and
// exactly-once delivery under many senders and receivers (goroutines,
// handles and processes), cancellation, close and drain, and a test that
// SIGKILLs sending and receiving processes at random.
//
// A backend's test package hands the suite to Helper from an init function
// (a helper process runs its role there and exits) and calls Run:
//
//	var chanSuite = chantest.Suite{Name: "local", Open: open, CrossProcess: true}
//
//	func init() { chantest.Helper(chanSuite) }
//
//	func TestChannel(t *testing.T) { chantest.Run(t, chanSuite, t.TempDir()) }
package chantest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// Suite describes one backend to the suite.
type Suite struct {
	// Name is unique among the suites of one test binary.
	Name string
	// Open opens the backend that cfg describes, in the test process and
	// in helper processes.
	Open func(cfg string) (baton.Backend, error)
	// CrossProcess runs the tests that re-execute the test binary.
	CrossProcess bool
	// Objects, when set, lists the backend's objects (files, keys) for
	// cfg; the bad-input test checks that refused calls create none.
	Objects func(cfg string) ([]string, error)
	// KillMessages is how many messages the kill test's steady senders
	// send (0: 100,000; BATON_CHAN_KILL_MESSAGES overrides it, e.g.
	// 1000000 for a long run).
	KillMessages int
	// HoldsEnds says that the backend holds the ends of a one-to-one
	// channel (baton.ChannelOptions.OneToOne): a second live sender or
	// receiver is refused with baton.ErrChannelBusy.
	HoldsEnds bool
}

const (
	envHelper = "BATON_CHANTEST_HELPER" // suite name + "/" + role
	envCfg    = "BATON_CHANTEST_CFG"
	envArgs   = "BATON_CHANTEST_ARGS"
)

// Run runs the suite for s against the backend at cfg.
func Run(t *testing.T, s Suite, cfg string) {
	runTests(t, &env{s: s, cfg: cfg}, []chanTest{
		{"Basics", testBasics, true},
		{"Batch", testBatch, true},
		{"ZeroCopy", testZeroCopy, true},
		{"RecvFunc", testRecvFunc, true},
		{"BadInput", testBadInput, true},
		{"Mismatch", testMismatch, true},
		{"Cancel", testCancel, true},
		{"CloseDrain", testCloseDrain, true},
		{"CloseRace", testCloseRace, true},
		{"HandleClose", testHandleClose, true},
		{"ManySendersReceivers", testMany, true},
		{"CrossProcess", testCrossProcess, s.CrossProcess},
		{"Kill", testKill, s.CrossProcess},
	})
	// The tests of one sending and one receiving handle again, on a
	// one-to-one channel, and what is its own.
	t.Run("OneToOne", func(t *testing.T) {
		runTests(t, &env{s: s, cfg: cfg, one: true}, []chanTest{
			{"Basics", testBasics, true},
			{"Batch", testBatch, true},
			{"ZeroCopy", testZeroCopy, true},
			{"RecvFunc", testRecvFunc, true},
			{"Cancel", testCancel, true},
			{"CloseDrain", testCloseDrain, true},
			{"CloseRace", testCloseRace, true},
			{"HandleClose", testHandleClose, true},
			{"Mismatch", testOneMismatch, true},
			{"Ends", testOneEnds, s.HoldsEnds},
			{"EndsOfTheDead", testOneEndsOfTheDead, s.HoldsEnds && s.CrossProcess},
			{"CrossProcess", testOneCrossProcess, s.CrossProcess},
			{"Kill", testOneKill, s.CrossProcess},
		})
	})
}

// chanTest is one test of the suite, run when need holds.
type chanTest struct {
	name string
	fn   func(*testing.T, *env)
	need bool
}

func runTests(t *testing.T, e *env, tests []chanTest) {
	for _, tc := range tests {
		if tc.need {
			t.Run(tc.name, func(t *testing.T) { tc.fn(t, e) })
		}
	}
}

// env is what the tests share.
type env struct {
	s   Suite
	cfg string
	one bool // the tests' channels are one-to-one
}

// names counts the names given in this process, across suites and runs
// (go test -count): a name is never handed out twice.
var names atomic.Int64

// start opens the backend for a test (closed when it ends) and returns a
// context and a name of the test's own.
func (e *env) start(t *testing.T) (baton.Backend, context.Context, string) {
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
	name := fmt.Sprintf("ct-%d-%d-%s", os.Getpid(), names.Add(1), strings.NewReplacer("/", "-").Replace(t.Name()))
	return b, context.Background(), name
}

// open opens a channel of the test's kind (one-to-one or not) and fails
// the test on error.
func (e *env) open(t *testing.T, b baton.Backend, ctx context.Context, name string, o baton.ChannelOptions) baton.Channel {
	t.Helper()
	o.OneToOne = e.one
	return open(t, b, ctx, name, o)
}

// open opens a channel and fails the test on error.
func open(t *testing.T, b baton.Backend, ctx context.Context, name string, o baton.ChannelOptions) baton.Channel {
	t.Helper()
	c, err := b.Channel(ctx, name, o)
	if err != nil {
		t.Fatalf("Channel(%q, %+v): %v", name, o, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func is(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got %v, want an error matching %v", what, err, want)
	}
}

func ok(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// within waits up to d for a call made in the background.
func within[T any](t *testing.T, ch <-chan T, d time.Duration, late string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatal(late)
	}
	var zero T
	return zero
}

// helperArgs is what a helper process is told to do.
type helperArgs struct {
	Name     string
	ID       int    // sender id
	Count    int    // messages to send; 0: until killed
	Log      string // receiver: file of records
	Capacity int
	Batch    int
	One      bool // a one-to-one channel
}

// Helper runs the role of a helper process and exits when the process is
// one (the suite re-executes the test binary with its role in the
// environment); otherwise it returns at once. Call it from an init
// function or TestMain of the backend's test package.
func Helper(suites ...Suite) {
	role := os.Getenv(envHelper)
	if role == "" {
		return
	}
	name, role, _ := strings.Cut(role, "/")
	for _, s := range suites {
		if s.Name != name {
			continue
		}
		var a helperArgs
		err := json.Unmarshal([]byte(os.Getenv(envArgs)), &a)
		if err == nil {
			err = runHelper(s, os.Getenv(envCfg), role, a)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "chantest helper %s: %v\n", role, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "chantest helper: no suite %q\n", name)
	os.Exit(2)
}

// killMessages returns the kill test's count of steady messages.
func (e *env) killMessages() int {
	if n, err := strconv.Atoi(os.Getenv("BATON_CHAN_KILL_MESSAGES")); err == nil && n > 0 {
		return n
	}
	if e.s.KillMessages > 0 {
		return e.s.KillMessages
	}
	return 100000
}

// isEOF reports the end of a closed and drained channel.
func isEOF(err error) bool { return errors.Is(err, io.EOF) }
