package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/redislock"
	"github.com/spf13/cobra"
)

// runFlags are the flags of run and sem.
type runFlags struct {
	shared, exclusive, exclusiveE bool
	nonblock                      bool
	timeout                       durationFlag
	conflict                      int
	command                       string
	close                         bool
	ttl                           durationFlag
	onLost                        string
	grace                         durationFlag
	verbose                       bool
	noticeEvery                   durationFlag

	jobs    jobsFlag // sem: capacity
	waitAll bool     // sem: wait until every slot is free, run nothing
	hold    bool     // lock: no command

	interval everyFlags  // run --at-most-every (every.go)
	flock    flockFlags  // run and lock on a file, lock --fd (flock.go)
	gnu      semGNUFlags // sem --id, --fg, --bg (semgnu.go)
}

const runLong = `Run CMD while holding the lock NAME, then release it.

baton waits for the lock (or gives up at once with -n, or after -w), starts
CMD with its arguments (no shell, unless -c), waits for it and exits with its
status. Flags are read up to NAME; everything after NAME is the command, so
"baton run NAME sh -c 'echo hi'" needs no "--".

The lock is the read-write lock NAME of the backend: -x (the default) takes it
exclusively, -s shared with other -s holders. Go programs share it through
Backend.RWMutex(NAME). On a backend without read-write locks (Redlock) -x
takes the Mutex NAME and -s is refused.

The lock is held by baton, not by CMD: CMD inherits no descriptor of it, so
processes CMD leaves behind do not keep it (flock's -o is always in effect).
CMD gets BATON_NAME, BATON_TOKEN (the fencing token of the hold) and
BATON_BACKEND in its environment. Signals sent to baton (TERM, HUP, INT, QUIT,
USR1, USR2) are passed on to CMD (in the foreground of a terminal, Ctrl-C and
Ctrl-\ reach CMD from the terminal itself and are not sent twice). If baton
itself is killed, the kernel kills CMD (the lock is gone with baton). If the lock is lost while CMD runs, baton
sends CMD SIGTERM, SIGKILL after --grace, and exits with 75.

When the wait takes longer than 400 ms, baton prints a line on standard
error saying what it waits for and who holds it (since when, where the
backend tells): once on a terminal, and every --notice-every (30 s) when
standard error is a log or a pipe. A wait that -w ends prints a last line
saying so. Ctrl-C while waiting exits 130 holding nothing.

` + exitCodesHelp

func newRunCmd() *cobra.Command {
	f := &runFlags{}
	cmd := underCommand(&cobra.Command{
		Use:   "run [flags] NAME [--] CMD [ARGS...]",
		Short: "Run a command while holding the lock NAME",
		Long:  runLong,
		Example: `  baton run -n -E 0 backup /usr/local/bin/backup     # skip quietly if the last one still runs
  baton run -w 1.5 cache make                          # wait 1.5 s at most, then exit 1
  baton run -s index ./reader                          # shared with other -s holders
  baton run deploy -c 'git pull && make install'       # via $SHELL -c (flock order)
  baton run --backend redis://10.0.0.5:6379 --ttl 30s deploy ./deploy.sh`,
	}, f, false)
	addModeFlags(cmd, f)
	fl := cmd.Flags()
	fl.BoolVarP(&f.exclusiveE, "exclusive-e", "e", false, "same as -x")
	_ = fl.MarkHidden("exclusive-e")
	addCommonFlags(cmd, f)
	addEveryFlags(cmd, f)
	addFileFlags(cmd, f, false)
	return cmd
}

func newSemCmd() *cobra.Command {
	f := &runFlags{}
	cmd := underCommand(&cobra.Command{
		Use:   "sem -j N [flags] NAME [--] CMD [ARGS...]",
		Short: "Run a command holding one of N slots of the semaphore NAME",
		Long: `Run CMD holding one slot of the counting semaphore NAME of N slots: at
most N commands run at once under the same NAME, on every host that uses the
backend. Every user of NAME must give the same N; a different N is refused
(exit 64) while the semaphore exists.

"baton sem -j N --wait NAME" runs nothing: it waits until all N slots are
free at once, then exits 0.

Waiting, signals, the environment of CMD and the loss of the slot work as for
"baton run" (see "baton run --help").

` + exitCodesHelp,
		Example: `  baton sem -j 4 gpu -- python train.py --epoch 3
  for f in *.flac; do baton sem -j 8 enc -- ffmpeg -i "$f" "${f%.flac}.mp3" & done; wait
  baton sem -j 8 --wait enc`,
	}, f, true)
	fl := cmd.Flags()
	fl.VarP(&f.jobs, "jobs", "j", "number of slots `N` (required): N, or +N, -N, N% of the CPUs as GNU sem reads them")
	fl.BoolVar(&f.waitAll, "wait", false, "wait until every slot is free; run no command")
	addCommonFlags(cmd, f)
	addSemGNUFlags(cmd, f)
	return cmd
}

// underCommand completes cmd as a command that takes what f asks for on
// NAME: flags are read up to NAME, the rest is the command.
func underCommand(cmd *cobra.Command, f *runFlags, sem bool) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.ValidArgsFunction = completeNames
	cmd.RunE = func(cmd *cobra.Command, args []string) error { return runUnder(cmd, f, args, sem) }
	cmd.Flags().SetInterspersed(false)
	return cmd
}

// addModeFlags adds the flags of lock and run that choose the lock mode.
func addModeFlags(cmd *cobra.Command, f *runFlags) {
	fl := cmd.Flags()
	fl.BoolVarP(&f.shared, "shared", "s", false, "take a shared lock (with other -s holders)")
	fl.BoolVarP(&f.exclusive, "exclusive", "x", false, "take an exclusive lock (the default)")
}

// addWaitFlags adds the flags of lock, run and sem: how long to wait, and
// what to say.
func addWaitFlags(cmd *cobra.Command, f *runFlags) {
	fl := cmd.Flags()
	fl.BoolVarP(&f.nonblock, "nonblock", "n", false, "fail at once (with the conflict code) if busy")
	fl.VarP(&f.timeout, "timeout", "w", "give up after `DUR` (1.5 = seconds, or 500ms, 2m); 0 means -n")
	fl.IntVarP(&f.conflict, "conflict-exit-code", "E", exitConflict, "exit with `N` (0-255) when busy with -n or after -w")
	fl.Var(&f.ttl, "ttl", "lease TTL `DUR` on network backends (default: the backend's, 10s; ignored on local)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "report the wait time and the token on standard error")
	fl.Var(&f.noticeEvery, "notice-every", "when standard error is not a terminal, repeat the waiting notice every `DUR` (default 30s; 0: once)")
}

// addCommonFlags adds the flags of run and sem.
func addCommonFlags(cmd *cobra.Command, f *runFlags) {
	addWaitFlags(cmd, f)
	fl := cmd.Flags()
	fl.StringVarP(&f.command, "command", "c", "", "run `STR` with $SHELL -c (default: exec CMD without a shell)")
	fl.BoolVarP(&f.close, "close", "o", false, "accepted for flock compatibility: the command never inherits the lock")
	fl.StringVar(&f.onLost, "on-lost", "term", "`action` when the lock is lost: term (SIGTERM, SIGKILL after --grace), kill (SIGKILL) or ignore")
	fl.Var(&f.grace, "grace", "wait `DUR` between SIGTERM and SIGKILL after a loss (default 5s)")
	_ = cmd.RegisterFlagCompletionFunc("on-lost", cobra.FixedCompletions([]string{"term", "kill", "ignore"}, cobra.ShellCompDirectiveNoFileComp))
}

// request is a parsed, validated run or sem invocation.
type request struct {
	name     string
	argv     []string // the command; argv[0] as given
	path     string   // argv[0] resolved on PATH
	shared   bool
	sem      int64 // > 0: semaphore of this capacity
	permits  int64 // permits to take of the semaphore
	waitAll  bool
	backend  string
	timeout  time.Duration
	nonblock bool
	grace    time.Duration

	noticeEvery time.Duration // repeat of the waiting notice off a terminal; 0: once
	hold        bool          // lock: no command, hold until a signal or the end of stdin
	file        string        // NAME is this file, locked with flock(2) (flock.go)
}

// noticeDelay is how long a wait lasts before baton says what it waits for.
const noticeDelay = 400 * time.Millisecond

// defaultNoticeEvery is the repeat of the waiting notice in a log.
const defaultNoticeEvery = 30 * time.Second

// parseRequest validates everything before any side effect.
func parseRequest(cmd *cobra.Command, f *runFlags, args []string, sem bool) (*request, error) {
	if len(args) == 0 {
		return nil, usageErrorf("missing NAME")
	}
	r := &request{name: args[0], shared: f.shared}
	rest := args[1:]
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	} else if len(rest) == 2 && (rest[0] == "-c" || rest[0] == "--command") && f.command == "" {
		// flock(1) order: NAME -c STR.
		f.command, rest = rest[1], nil
	}
	if isFilePath(r.name) && !sem {
		r.file = filepath.Clean(r.name)
	} else if err := baton.ValidateName(r.name); err != nil {
		return nil, usageErrorf("%s", strings.TrimPrefix(err.Error(), "baton: "))
	}
	if f.shared && (f.exclusive || f.exclusiveE) {
		return nil, usageErrorf("-s and -x exclude each other")
	}
	if f.conflict < 0 || f.conflict > 255 {
		return nil, usageErrorf("-E %d: the conflict exit code must be 0 to 255", f.conflict)
	}
	switch f.onLost {
	case "term", "kill", "ignore":
	default:
		return nil, usageErrorf("--on-lost %q: want term, kill or ignore", f.onLost)
	}
	if f.ttl.set && f.ttl.d <= 0 {
		return nil, usageErrorf("--ttl must be more than 0")
	}
	r.grace = 5 * time.Second
	if f.grace.set {
		r.grace = f.grace.d
	}
	r.noticeEvery = defaultNoticeEvery
	if f.noticeEvery.set {
		r.noticeEvery = f.noticeEvery.d
	}
	r.nonblock = f.nonblock
	if f.timeout.set {
		if f.timeout.d == 0 {
			r.nonblock = true
		}
		r.timeout = f.timeout.d
	}
	if sem {
		if !f.jobs.set {
			return nil, usageErrorf("-j N is required and must be at least 1")
		}
		r.sem, r.permits, r.waitAll = f.jobs.n, 1, f.waitAll
		if f.waitAll {
			r.permits = f.jobs.n
		}
	}
	switch {
	case f.hold && len(rest) > 0:
		return nil, usageErrorf("lock runs no command (unexpected %q); use baton run NAME CMD", rest[0])
	case f.hold:
		r.hold = true
	case r.waitAll && (f.command != "" || len(rest) > 0):
		return nil, usageErrorf("--wait runs no command")
	case r.waitAll:
	case f.command != "" && len(rest) > 0:
		return nil, usageErrorf("-c takes the whole command as one string; unexpected %q", rest[0])
	case f.command != "":
		sh := os.Getenv("SHELL")
		if sh == "" {
			sh = "/bin/sh"
		}
		r.argv = []string{sh, "-c", f.command}
	case len(rest) == 0:
		return nil, usageErrorf("missing command after NAME %q", r.name)
	default:
		r.argv = rest
	}
	var err error
	if r.backend, r.path, err = commandTarget(cmd, r.argv); err != nil {
		return nil, err
	}
	return r, nil
}

// releaseTimeout bounds the release and the closing of the backend after the
// command ended: an unreachable server must not keep baton alive (a lease
// then expires by itself).
const releaseTimeout = 5 * time.Second

// lostReleaseTimeout bounds the release of a hold known to be lost.
const lostReleaseTimeout = time.Second

func runUnder(cmd *cobra.Command, f *runFlags, args []string, sem bool) error {
	if done, err := lockFDForm(cmd, f, args); done {
		return err
	}
	args, err := fileArgs(f, args)
	if err != nil {
		return err
	}
	if sem {
		var done bool
		if args, done, err = semGNU(cmd, f, args); done {
			return err
		}
	}
	r, err := parseRequest(cmd, f, args, sem)
	if err != nil {
		return err
	}
	if f.interval.every.set || f.interval.maxRun.set {
		return runEvery(cmd, f, r)
	}
	setLogger(f.verbose)
	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, caughtSignals...)
	defer signal.Stop(sigc)

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	start := time.Now()

	// Open the backend and acquire in the background, so that a signal
	// ends the wait (connecting to a cluster included).
	type result struct {
		b          baton.Backend
		h          held
		err        error
		timedOut   bool // the wait ended by -w
		unanswered bool // ... and the backend did not answer meanwhile
	}
	resc := make(chan result, 1)
	go func() {
		// -w bounds the whole wait, connecting included.
		actx, acancel := ctx, context.CancelFunc(func() {})
		if r.timeout > 0 {
			actx, acancel = context.WithTimeoutCause(ctx, r.timeout, errTimedOut)
		}
		if r.file != "" {
			h, err := flockFile(actx, r)
			resc <- result{h: h, err: err, timedOut: err != nil && errors.Is(context.Cause(actx), errTimedOut)}
			acancel()
			return
		}
		b, err := openBackend(actx, r.backend, backendOptions{ttl: f.ttl.d})
		if err != nil {
			acancel()
			resc <- result{err: err}
			return
		}
		var answered <-chan bool
		if r.timeout > 0 && !r.nonblock {
			// The question gets at least probeAtLeast, past a short -w:
			// a loaded server may take longer than that to answer, and
			// only no answer at all makes a timed-out wait a failure
			// rather than busy.
			pctx, pcancel := context.WithTimeout(ctx, max(r.timeout, probeAtLeast))
			defer pcancel()
			answered = probe(pctx, b, r)
		}
		h, err := acquire(actx, b, r)
		timedOut := err != nil && errors.Is(context.Cause(actx), errTimedOut)
		unanswered := timedOut && answered != nil && !<-answered
		acancel()
		resc <- result{b: b, h: h, err: err, timedOut: timedOut, unanswered: unanswered}
	}()

	// A wait that lasts says what it waits for: once on a terminal, and
	// again every --notice-every in a log.
	tty := isTerminal(2)
	var notice <-chan time.Time
	var noticeTimer *time.Timer
	if !r.nonblock {
		noticeTimer = time.NewTimer(noticeDelay)
		defer noticeTimer.Stop()
		notice = noticeTimer.C
	}
	var res result
	var sigExit int
wait:
	for {
		select {
		case s := <-sigc:
			if sigExit == 0 {
				sigExit = signalExit(s)
			}
			cancel(signalCause{s})
		case <-notice:
			printNotice(ctx, r, tty)
			notice = nil
			if !tty && r.noticeEvery > 0 {
				noticeTimer.Reset(r.noticeEvery)
				notice = noticeTimer.C
			}
		case res = <-resc:
			break wait
		}
	}
	closeBound := releaseTimeout
	if res.b != nil {
		defer func() { closeBackend(res.b, closeBound) }()
	}
	if sigExit != 0 {
		// Interrupted: whatever the wait returned, hold nothing.
		if res.err == nil {
			_ = bounded(releaseTimeout, res.h.release)
		}
		return exitWith(sigExit, nil)
	}
	if res.err != nil {
		var ee *exitError
		switch {
		case errors.As(res.err, &ee):
			return res.err
		case errors.Is(res.err, redislock.ErrRestartWait):
			// Not busy: the server's restart-safety wait, which the
			// error explains.
			return classify(res.err)
		case res.unanswered:
			return exitWith(exitBackend, fmt.Errorf("backend %s did not answer within %v", baton.RedactURL(r.backend), r.timeout))
		case errors.Is(res.err, baton.ErrLocked), res.timedOut:
			if f.verbose || res.timedOut {
				fmt.Fprintf(os.Stderr, "baton: %s is busy; gave up after %v\n", describe(r), time.Since(start).Round(time.Millisecond))
			}
			return exitWith(f.conflict, nil)
		}
		if r.sem > 0 && errors.Is(res.err, baton.ErrMismatch) {
			if me := (*baton.MismatchError)(nil); errors.As(res.err, &me) && me.Have > 0 {
				return usageErrorf("semaphore %q: open with -j %d: it exists with %d slots", r.name, r.sem, me.Have)
			}
			return usageErrorf("semaphore %q: open with -j %d: it exists with another number of slots", r.name, r.sem)
		}
		err := classify(res.err)
		if errors.As(err, &ee) && ee.code == exitBackend && !strings.Contains(res.err.Error(), hostsOf(r.backend)) {
			// Say which server failed, as the cause may not (an i/o timeout).
			return exitWith(exitBackend, fmt.Errorf("%w (backend %s)", res.err, baton.RedactURL(r.backend)))
		}
		return err
	}
	h := res.h
	if f.verbose {
		fmt.Fprintf(os.Stderr, "baton: holding %s after %v (token %d)\n", describe(r), time.Since(start).Round(time.Millisecond), h.hold.Token())
	}
	if r.waitAll {
		if err := bounded(releaseTimeout, h.release); err != nil {
			return classify(err)
		}
		return nil
	}
	if r.hold {
		return holdOnly(r, h, sigc, &closeBound)
	}
	sayStarted()
	return supervise(r, f, h, sigc, &closeBound)
}
