package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/batonlock/baton"
	"github.com/spf13/cobra"
)

const lockLong = `Take the lock NAME and hold it with no command: print the fencing token
on standard output once the lock is held, then hold it until baton gets
SIGTERM, SIGINT or SIGHUP, or its standard input ends, and release it. This
is the form for shell scripts that lock around several commands, as flock(1)
on a file descriptor or "etcdctl lock" without a command do.

Standard input counts when it is a pipe, a socket or (in the foreground) a
terminal; when it is /dev/null or a file, as for a background job, only a
signal ends the hold. The lock is held by the baton process: whatever
happens to the script, the lock goes with baton.

Exit status: 0 when the hold ended by a signal or the end of input; the
conflict code (-E, 1) when -n or -w gave up, with nothing printed on
standard output; 75 when the lock was lost while held (a lease that could
not be renewed, a lock file that was removed); 64, 70 as for "baton run".`

func newLockCmd() *cobra.Command {
	f := &runFlags{hold: true}
	cmd := underCommand(&cobra.Command{
		Use:   "lock [flags] NAME",
		Short: "Hold the lock NAME with no command, until a signal or the end of stdin",
		Long:  lockLong,
		Example: `  # bash: hold "deploy" around several commands
  coproc LOCK { baton lock -w 60 deploy; }
  read -r TOKEN <&"${LOCK[0]}" || exit 1      # the token once held; EOF if it gave up
  ./step1 --fence "$TOKEN" && ./step2
  exec {LOCK[1]}>&-; wait "$LOCK_PID"         # end of stdin: release

  # any shell: hold until killed
  baton lock deploy > token & LOCKER=$!
  ...; kill "$LOCKER"; wait "$LOCKER"`,
	}, f, false)
	addModeFlags(cmd, f)
	addWaitFlags(cmd, f)
	addFileFlags(cmd, f, true)
	f.onLost = "term"
	return cmd
}

// holdOnly prints the token of h and holds it until a signal, the end of
// standard input or its loss.
func holdOnly(r *request, h held, sigc <-chan os.Signal, closeBound *time.Duration) error {
	fmt.Fprintln(os.Stdout, h.hold.Token())
	select {
	case <-sigc:
	case <-stdinEnd():
	case <-h.hold.Lost():
		*closeBound = lostReleaseTimeout
		fmt.Fprintf(os.Stderr, "baton: %s was lost: %s\n", describe(r), errText(h.hold.Err()))
		_ = bounded(lostReleaseTimeout, h.release)
		return exitWith(exitLost, nil)
	}
	if err := bounded(releaseTimeout, h.release); err != nil {
		if errors.Is(err, baton.ErrLost) {
			*closeBound = lostReleaseTimeout
			fmt.Fprintf(os.Stderr, "baton: %s was lost while held: %s\n", describe(r), errText(err))
			return exitWith(exitLost, nil)
		}
		fmt.Fprintf(os.Stderr, "baton: releasing %s: %s\n", describe(r), errText(err))
	}
	return nil
}

// stdinEnd returns a channel closed when standard input ends, or nil when
// standard input is not one whose end means anything: /dev/null or a file
// (a background job's input), or a terminal of which baton is not in the
// foreground (reading it would stop baton).
func stdinEnd() <-chan struct{} {
	fi, err := os.Stdin.Stat()
	if err != nil {
		return nil
	}
	switch m := fi.Mode(); {
	case m&(os.ModeNamedPipe|os.ModeSocket) != 0:
	case isTerminal(0) && inForeground():
	default:
		return nil
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	return done
}
