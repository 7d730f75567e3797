package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/batonlock/baton"
	"github.com/spf13/cobra"
)

const workLong = `Run CMD once per job of the queue NAME, with up to N at a time (-j).

Each run gets the job's payload on its standard input and BATON_JOB_ID,
BATON_JOB_ATTEMPT, BATON_TOKEN (the claim's fencing token), BATON_NAME and
BATON_BACKEND in its environment. Exit status 0 acknowledges the job; any
other status fails this attempt (the job is claimed again, or becomes a
dead letter after its last attempt; the status is its reason). If the claim
is lost while CMD runs, CMD is sent SIGTERM, then SIGKILL after --grace.

The first SIGINT or SIGTERM stops taking jobs and lets the running ones
finish; a second one passes SIGTERM on to them. baton then exits 128+S.
If baton itself dies, the kernel kills the commands and their jobs go back
to the queue.

` + exitCodesHelp

type workFlags struct {
	jobs    int
	grace   durationFlag
	command string
}

func newWorkCmd() *cobra.Command {
	f := &workFlags{}
	cmd := &cobra.Command{
		Use:     "work [flags] NAME [--] CMD [ARGS...]",
		Short:   "Run a command for each job of a work queue",
		Long:    workLong,
		Example: "  baton work -j 4 thumbnails -- ./make-thumbnail\n  baton work mail -c 'sendmail -t'",
		RunE:    func(cmd *cobra.Command, args []string) error { return work(cmd, f, args) },
	}
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().IntVarP(&f.jobs, "jobs", "j", 1, "run up to `N` jobs at a time")
	cmd.Flags().Var(&f.grace, "grace", "wait `DUR` between SIGTERM and SIGKILL after a loss (default 5s)")
	cmd.Flags().StringVarP(&f.command, "command", "c", "", "run `STR` with $SHELL -c for each job")
	return cmd
}

func work(cmd *cobra.Command, f *workFlags, args []string) error {
	if len(args) == 0 {
		return usageErrorf("missing NAME")
	}
	name, argv := args[0], args[1:]
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	if err := baton.ValidateName(name); err != nil {
		return usageErrorf("%s", strings.TrimPrefix(err.Error(), "baton: "))
	}
	switch {
	case f.jobs < 1 || f.jobs > 1<<16:
		return usageErrorf("-j %d: want 1 to 65536", f.jobs)
	case f.command != "" && len(argv) > 0:
		return usageErrorf("-c takes the whole command as one string; unexpected %q", argv[0])
	case f.command != "":
		sh := os.Getenv("SHELL")
		if sh == "" {
			sh = "/bin/sh"
		}
		argv = []string{sh, "-c", f.command}
	case len(argv) == 0:
		return usageErrorf("missing command after NAME %q", name)
	}
	path, err := commandPath(argv)
	if err != nil {
		return err
	}
	grace := 5 * time.Second
	if f.grace.set {
		grace = f.grace.d
	}
	raw := backendURL(cmd)
	if err := checkBackendURL(raw); err != nil {
		return err
	}
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, sigTerm, caughtSignals[0])
	defer signal.Stop(sigc)
	// claimCtx ends the taking of jobs; killCtx, the running commands.
	claimCtx, stopClaims := context.WithCancel(context.Background())
	defer stopClaims()
	killCtx, killAll := context.WithCancel(context.Background())
	defer killAll()
	q, closeQueue, err := openQueue(claimCtx, raw, name)
	if err != nil {
		return err
	}
	defer closeQueue()
	childURL, childEnv := childBackend(raw)
	w := &worker{q: q, name: name, path: path, argv: argv, grace: grace, env: append(append(os.Environ(), "BATON_NAME="+name, "BATON_BACKEND="+childURL), childEnv...)}
	var (
		wg      sync.WaitGroup
		errOnce sync.Once
		failErr error
	)
	for range f.jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				j, err := q.Claim(claimCtx)
				if err != nil {
					if claimCtx.Err() == nil {
						errOnce.Do(func() { failErr = err; stopClaims() })
					}
					return
				}
				w.run(killCtx, j)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	exit := 0
	for {
		select {
		case s := <-sigc:
			if exit == 0 {
				exit = signalExit(s)
				stopClaims()
				fmt.Fprintf(os.Stderr, "baton: taking no more jobs of %q; waiting for the running ones (again to stop them)\n", name)
			} else {
				killAll()
			}
		case <-done:
			if failErr != nil {
				return queueErr(failErr)
			}
			if exit != 0 {
				return &exitError{code: exit}
			}
			return nil
		}
	}
}

// worker runs the command for jobs.
type worker struct {
	q     baton.Queue
	name  string
	path  string
	argv  []string
	env   []string
	grace time.Duration
}

// run runs the command for job j and ends its claim by the command's
// status.
func (w *worker) run(killCtx context.Context, j *baton.Job) {
	ctx := context.Background()
	c := &exec.Cmd{
		Path:   w.path,
		Args:   w.argv,
		Stdin:  bytes.NewReader(j.Payload()),
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Env: append(w.env[:len(w.env):len(w.env)],
			"BATON_JOB_ID="+strconv.FormatUint(uint64(j.ID()), 10),
			"BATON_JOB_ATTEMPT="+strconv.Itoa(j.Attempt()),
			"BATON_TOKEN="+strconv.FormatUint(uint64(j.Token()), 10)),
		SysProcAttr: sysProcAttr(true),
	}
	waitc, err := startCommand(c)
	if err != nil {
		w.end(ctx, j, fmt.Sprintf("cannot execute %s: %v", w.argv[0], err))
		return
	}
	lostc, stopc := j.Lost(), killCtx.Done()
	var killc <-chan time.Time
	var waitErr error
wait:
	for {
		select {
		case <-lostc:
			lostc = nil
			fmt.Fprintf(os.Stderr, "baton: job %d of %q: claim lost: %s; sending SIGTERM to the command (SIGKILL in %v)\n", j.ID(), w.name, errText(j.Err()), w.grace)
			killc = termThenKill(c.Process, true, w.grace)
		case <-stopc:
			stopc = nil
			_ = signalChild(c.Process, sigTerm, true)
		case <-killc:
			killc = nil
			_ = signalChild(c.Process, sigKill, true)
		case waitErr = <-waitc:
			break wait
		}
	}
	var xe *exec.ExitError
	switch {
	case waitErr == nil:
		if err := j.Ack(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "baton: job %d of %q: ack: %s\n", j.ID(), w.name, errText(err))
		}
	case errors.As(waitErr, &xe):
		w.end(ctx, j, fmt.Sprintf("exit status %d", exitStatus(xe.ProcessState)))
	default:
		w.end(ctx, j, waitErr.Error())
	}
}

// end fails the claim of j with reason, and says so.
func (w *worker) end(ctx context.Context, j *baton.Job, reason string) {
	last := ""
	if j.Attempt() >= j.MaxAttempts() {
		last = "; it is a dead letter now"
	}
	fmt.Fprintf(os.Stderr, "baton: job %d of %q, attempt %d of %d: %s%s\n", j.ID(), w.name, j.Attempt(), j.MaxAttempts(), reason, last)
	if err := j.Fail(ctx, reason); err != nil {
		fmt.Fprintf(os.Stderr, "baton: job %d of %q: %s\n", j.ID(), w.name, errText(err))
	}
}
