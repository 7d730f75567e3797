package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/recipe"
)

// run --at-most-every: a command that many hosts schedule (cron) and one
// of them runs, at most once per interval (recipe.IntervalLock).

// everyFlags are run's flags of the interval form.
type everyFlags struct {
	every  durationFlag
	maxRun durationFlag
}

const everyHelp = `
With --at-most-every DUR, CMD runs only if no run of NAME is in progress on
any host and none started less than DUR ago; otherwise baton exits 0 at once
(or with -E N when -E is given), saying why with -v. The start is recorded
on the backend (the Mutex and the Value NAME, not the lock that plain
"baton run NAME" takes), so cron entries on many machines run the job once
per interval. --max-run DUR gives a run up after DUR even if CMD hangs:
CMD gets SIGTERM, SIGKILL after --grace, and baton exits 75; a run may then
start elsewhere once DUR and the interval have passed.
`

func addEveryFlags(cmd *cobra.Command, f *runFlags) {
	fl := cmd.Flags()
	fl.Var(&f.interval.every, "at-most-every", "run CMD only if no run of NAME started within `DUR`, on any host (cron jobs)")
	fl.Var(&f.interval.maxRun, "max-run", "with --at-most-every: give a run up after `DUR` (SIGTERM, then SIGKILL)")
	cmd.Long += everyHelp
	cmd.Example += "\n  baton run --at-most-every 1h --max-run 50m nightly ./report.sh   # in cron on every host"
}

// runEvery is run with --at-most-every.
func runEvery(cmd *cobra.Command, f *runFlags, r *request) error {
	iv := recipe.Interval{AtLeast: f.interval.every.d, AtMost: f.interval.maxRun.d}
	switch {
	case iv.AtLeast <= 0:
		return usageErrorf("--at-most-every must be more than 0")
	case r.shared:
		return usageErrorf("--at-most-every runs one command at a time: -s does not apply")
	case r.file != "":
		return usageErrorf("--at-most-every takes a NAME of the backend, not a file")
	case f.interval.maxRun.set && iv.AtMost <= 0:
		return usageErrorf("--max-run must be more than 0")
	}
	setLogger(f.verbose)
	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, caughtSignals...)
	defer signal.Stop(sigc)
	ch := newChild()
	type outcome struct {
		res     recipe.RunResult
		err     error
		status  int
		stopped bool
		runErr  error
		b       baton.Backend
	}
	var o outcome
	sigExit := ch.serve(sigc, func(ctx context.Context) {
		if o.b, o.err = openBackend(ctx, r.backend, backendOptions{ttl: f.ttl.d}); o.err != nil {
			return
		}
		l, err := recipe.NewIntervalLock(ctx, o.b, r.name)
		if err != nil {
			o.err = err
			return
		}
		defer l.Close()
		childURL, childEnv := childBackend(r.backend)
		ended := make(chan struct{})
		o.res, o.err = l.Run(ctx, iv, func(rctx context.Context) error {
			defer close(ended)
			env := append(append(os.Environ(), "BATON_NAME="+r.name, "BATON_BACKEND="+childURL), childEnv...)
			o.status, o.stopped, o.runErr = ch.run(rctx, r.path, r.argv, env, r.grace)
			return nil
		})
		if o.res.Ran {
			<-ended // given up: the command is stopping, SIGKILL at the latest
		}
	})
	if o.b != nil {
		defer closeBackend(o.b, releaseTimeout)
	}
	switch {
	case o.runErr != nil:
		return exitWith(exitNoExec, fmt.Errorf("cannot execute %s: %v", r.argv[0], o.runErr))
	case sigExit != 0:
		return exitWith(sigExit, nil)
	case o.res.Ran && errors.Is(o.err, baton.ErrLost):
		fmt.Fprintf(os.Stderr, "baton: run of %q given up: %s\n", r.name, errText(o.err))
		return exitWith(exitLost, nil)
	case o.err != nil:
		return classify(o.err)
	case !o.res.Ran:
		if f.verbose {
			if o.res.Next.IsZero() {
				fmt.Fprintf(os.Stderr, "baton: %q runs elsewhere; skipped\n", r.name)
			} else {
				fmt.Fprintf(os.Stderr, "baton: %q ran at %s; next at %s; skipped\n", r.name,
					o.res.Last.Format(time.RFC3339), o.res.Next.Format(time.RFC3339))
			}
		}
		if cmd.Flags().Changed("conflict-exit-code") {
			return exitWith(f.conflict, nil)
		}
		return nil
	case o.status != 0:
		return exitWith(o.status, nil)
	}
	return nil
}
