package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/recipe"
)

// baton elect: leader election (recipe.Election) from the shell, in the
// forms of etcdctl elect, and a command run while leader.

type electFlags struct {
	listen   bool
	timeout  durationFlag
	conflict int
	ttl      durationFlag
	grace    durationFlag
	verbose  bool
}

const electLong = `Campaign to be the leader of the election NAME, or watch who leads it.

"baton elect NAME [PROPOSAL]" waits until elected, publishes PROPOSAL
(default HOST:PID) as the leader's value, prints it on standard output, and
leads until baton gets SIGTERM, SIGINT or SIGHUP or its standard input ends;
then it resigns and the next candidate is elected.

"baton elect NAME [PROPOSAL] -- CMD [ARGS...]" runs CMD once elected and
resigns when it ends, exiting with its status. If the leadership is lost
while CMD runs (a lease that could not be renewed), CMD gets SIGTERM,
SIGKILL after --grace, and baton exits 75. CMD gets BATON_NAME,
BATON_TOKEN (the leadership's fencing token) and BATON_BACKEND.

"baton elect --listen NAME" prints the leader's value now and at every
change, one line each (an empty line when no one leads), until a signal.

Go programs take part through recipe.NewElection(ctx, backend, NAME).

` + exitCodesHelp

func newElectCmd() *cobra.Command {
	f := &electFlags{}
	cmd := &cobra.Command{
		Use:   "elect [flags] NAME [PROPOSAL] [-- CMD [ARGS...]]",
		Short: "Campaign to lead the election NAME, run a command while leader, or watch the leader",
		Long:  electLong,
		Example: `  baton elect scheduler "$(hostname)"                  # lead until Ctrl-C
  baton elect --listen scheduler                         # who leads, at every change
  baton elect scheduler -- ./scheduler --serve           # run while leader`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: completeNames,
		RunE:              func(cmd *cobra.Command, args []string) error { return runElect(cmd, f, args) },
	}
	cmd.Flags().SetInterspersed(false)
	fl := cmd.Flags()
	fl.BoolVarP(&f.listen, "listen", "l", false, "watch the leader's value; campaign for nothing")
	fl.VarP(&f.timeout, "timeout", "w", "give the campaign up after `DUR` (exit with the conflict code)")
	fl.IntVarP(&f.conflict, "conflict-exit-code", "E", exitConflict, "exit with `N` (0-255) when -w gives up")
	fl.Var(&f.ttl, "ttl", "lease TTL `DUR` on network backends (default: the backend's)")
	fl.Var(&f.grace, "grace", "wait `DUR` between SIGTERM and SIGKILL after a loss (default 5s)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "report the fencing token on standard error")
	return cmd
}

// electRequest is a parsed, validated elect invocation.
type electRequest struct {
	name, proposal string
	argv           []string
	path           string
	backend        string
	grace          time.Duration
}

func parseElect(cmd *cobra.Command, f *electFlags, args []string) (*electRequest, error) {
	if len(args) == 0 {
		return nil, usageErrorf("missing NAME")
	}
	r := &electRequest{name: args[0], grace: 5 * time.Second}
	if f.grace.set {
		r.grace = f.grace.d
	}
	rest := args[1:]
	for i, a := range rest {
		if a == "--" {
			r.argv, rest = rest[i+1:], rest[:i]
			if len(r.argv) == 0 {
				return nil, usageErrorf("missing command after --")
			}
			break
		}
	}
	if err := baton.ValidateName(r.name); err != nil {
		return nil, usageErrorf("%s", err.Error())
	}
	switch {
	case len(rest) > 1:
		return nil, usageErrorf("unexpected %q after the proposal (a command goes after --)", rest[1])
	case f.listen && (len(rest) > 0 || r.argv != nil):
		return nil, usageErrorf("--listen takes NAME only")
	case len(rest) == 1:
		r.proposal = rest[0]
	default:
		host, _ := os.Hostname()
		r.proposal = host + ":" + strconv.Itoa(os.Getpid())
	}
	if len(r.proposal) > recipe.MaxLeaderValue {
		return nil, usageErrorf("a proposal of %d bytes: at most %d", len(r.proposal), recipe.MaxLeaderValue)
	}
	if f.conflict < 0 || f.conflict > 255 {
		return nil, usageErrorf("-E %d: the conflict exit code must be 0 to 255", f.conflict)
	}
	if f.ttl.set && f.ttl.d <= 0 {
		return nil, usageErrorf("--ttl must be more than 0")
	}
	var err error
	if r.backend, r.path, err = commandTarget(cmd, r.argv); err != nil {
		return nil, err
	}
	return r, nil
}

func runElect(cmd *cobra.Command, f *electFlags, args []string) error {
	r, err := parseElect(cmd, f, args)
	if err != nil {
		return err
	}
	setLogger(f.verbose)
	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, caughtSignals...)
	defer signal.Stop(sigc)
	ch := newChild()
	var b baton.Backend
	sigExit := ch.serve(sigc, func(ctx context.Context) { err = elect(ctx, f, r, ch, &b) })
	if b != nil {
		closeBackend(b, releaseTimeout)
	}
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		return err
	case sigExit != 0 && err == nil:
		return nil // a signal is how listening and leading end
	case sigExit != 0:
		return exitWith(sigExit, nil)
	case err != nil:
		return classify(err)
	}
	return nil
}

// elect does what r asks on a backend it opens into *b.
func elect(ctx context.Context, f *electFlags, r *electRequest, ch *child, b *baton.Backend) error {
	be, err := openBackend(ctx, r.backend, backendOptions{ttl: f.ttl.d})
	if err != nil {
		return err
	}
	*b = be
	el, err := recipe.NewElection(ctx, be, r.name)
	if err != nil {
		return err
	}
	defer el.Close()
	if f.listen {
		for l, err := range el.Observe(ctx) {
			if err != nil {
				return err
			}
			fmt.Printf("%s\n", l.Value)
			if f.verbose && l.Token != 0 {
				fmt.Fprintf(os.Stderr, "baton: leader token %d\n", l.Token)
			}
		}
		return nil // ended by a signal
	}
	cctx, ccancel := ctx, context.CancelFunc(func() {})
	if f.timeout.set {
		cctx, ccancel = context.WithTimeoutCause(ctx, f.timeout.d, errTimedOut)
	}
	lead, err := el.Campaign(cctx, []byte(r.proposal))
	timedOut := err != nil && errors.Is(context.Cause(cctx), errTimedOut)
	ccancel()
	if timedOut {
		if f.verbose {
			fmt.Fprintf(os.Stderr, "baton: not elected leader of %q within %v\n", r.name, f.timeout.d)
		}
		return exitWith(f.conflict, nil)
	}
	if err != nil {
		return err
	}
	if f.verbose {
		fmt.Fprintf(os.Stderr, "baton: leader of %q (token %d)\n", r.name, lead.Token())
	}
	resign := func() error {
		return bounded(releaseTimeout, lead.Resign)
	}
	lost := func(err error) error {
		fmt.Fprintf(os.Stderr, "baton: leadership of %q was lost: %s\n", r.name, errText(err))
		_ = bounded(lostReleaseTimeout, lead.Resign)
		return exitWith(exitLost, nil)
	}
	if r.argv == nil {
		fmt.Println(r.proposal)
		select {
		case <-ctx.Done():
		case <-stdinEnd():
		case <-lead.Lost():
			return lost(lead.Err())
		}
		if err := resign(); err != nil {
			if errors.Is(err, baton.ErrLost) {
				return lost(err)
			}
			return err
		}
		return nil
	}
	lctx, lcancel := lead.Context(context.Background())
	defer lcancel()
	childURL, childEnv := childBackend(r.backend)
	env := append(append(os.Environ(), "BATON_NAME="+r.name,
		"BATON_TOKEN="+strconv.FormatUint(uint64(lead.Token()), 10), "BATON_BACKEND="+childURL), childEnv...)
	status, stopped, err := ch.run(lctx, r.path, r.argv, env, r.grace)
	if err != nil {
		_ = resign()
		return exitWith(exitNoExec, fmt.Errorf("cannot execute %s: %v", r.argv[0], err))
	}
	if stopped || lead.Err() != nil {
		return lost(lead.Err())
	}
	if err := resign(); err != nil && errors.Is(err, baton.ErrLost) {
		return lost(err)
	}
	if status != 0 {
		return exitWith(status, nil)
	}
	return nil
}
