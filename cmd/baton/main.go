// Command baton runs a program under a named lock or counting semaphore of
// any baton backend (same host, Redis, etcd, PostgreSQL, MySQL/MariaDB,
// ZooKeeper) and shows who holds what.
//
//	baton run [flags] NAME [--] CMD [ARGS...]   run CMD while holding the lock NAME
//	baton sem -j N [flags] NAME [--] CMD...     run CMD holding one of N slots
//	baton lock [flags] NAME                     hold NAME until a signal or the end of stdin
//	baton status NAME | baton ls | baton rm [--force] NAME | baton rm --all PREFIX
//
// The lock is held by the baton process itself, never by the command: baton
// waits for the lock, starts the command, and releases the lock when the
// command ends. If the lock is lost while the command runs (a lease that
// could not be renewed, a lock file that was removed), baton stops the
// command and exits with a code of its own. See `baton --help` for the exit
// codes and docs/CLI.md for examples.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes of baton itself. Anything else is the command's own status.
const (
	exitConflict = 1  // default of -E: the lock was busy (-n) or the wait timed out (-w)
	exitUsage    = 64 // bad flag, duration, URL, name, or a missing command
	exitNoExec   = 69 // the command could not be started
	exitBackend  = 70 // the backend failed: unreachable, refused, unsupported
	exitLost     = 75 // the lock was lost while the command ran
	exitNotFound = 1  // status/rm: no such object
)

const exitCodesHelp = `Exit codes:
  N        the command's own exit status; 128+S if it was killed by signal S
  1        lock busy with -n, or -w timed out (change with -E/--conflict-exit-code)
  64       usage: unknown flag, bad duration, bad backend URL, bad name,
           missing command
  69       the command could not be executed (not found, not executable)
  70       the backend failed (cannot connect, no answer within -w, error
           from the server, primitive not supported by the backend)
  75       the lock was lost while the command ran; the command was sent
           SIGTERM (then SIGKILL after --grace) unless --on-lost=ignore
  128+S    baton was interrupted by signal S while it waited (130 for Ctrl-C);
           nothing is held
  status and rm exit 1 when no object has the name.`

// exitError carries the exit code of a failed run. A nil err means the
// message was already printed (or there is none to print).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

func exitWith(code int, err error) error { return &exitError{code: code, err: err} }

func main() {
	os.Exit(execute(os.Args[1:]))
}

// execute runs the command line args and returns the exit code.
func execute(args []string) int {
	root := newRootCmd()
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	var ee *exitError
	code := exitUsage // errors that are not ours come from cobra's parsing
	if errors.As(err, &ee) {
		code = ee.code
		err = ee.err
	}
	if err != nil {
		msg := strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
		msg = strings.ReplaceAll(msg, ": baton: ", ": ") // one prefix: the causes' own go
		for strings.HasPrefix(msg, "baton: ") {
			msg = strings.TrimPrefix(msg, "baton: ")
		}
		if code == exitUsage && cmd != nil {
			msg += fmt.Sprintf(" (see '%s --help')", cmd.CommandPath())
		}
		fmt.Fprintf(os.Stderr, "baton: %s\n", msg)
	}
	return code
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "baton",
		Short: "Run commands under named locks and semaphores, on one host or a cluster",
		Long: `baton runs a command while holding a named lock or a slot of a counting
semaphore, on any baton backend: the same host (no server), Redis, etcd,
PostgreSQL, MySQL/MariaDB or ZooKeeper.
It is a superset of flock(1): a NAME that is an absolute path (or --file)
is locked with flock(2) as flock(1) locks it, "baton lock --fd N" and -u
lock the shell's descriptors, with -s/-x/-n/-w/-E/-c/-o; it also shows and
removes the objects of a backend.

Backend: --backend URL, else $BATON_BACKEND, else the same-host default.
  local:  local:///DIR  file:///DIR          same host; DIR is the namespace
                                              directory (default
                                              $XDG_RUNTIME_DIR/baton or
                                              /dev/shm/baton-UID)
  redis://[user:pass@]host:port[/db][?opts]   one Redis node (rediss:// for TLS)
  redis+cluster://h1:p1,h2:p2                 Redis Cluster
  redlock://h1:p1,h2:p2,h3:p3                 Redlock over independent nodes
  redis+sentinel://s1:p1,s2:p2/MASTER         the master that Sentinels monitor
  etcd://h1:2379,h2:2379[/prefix]             etcd (etcds:// for TLS)
  postgres://[user[:pass]@]host[:port]/db     PostgreSQL
  mysql://[user[:pass]@]host[:port]/db        MySQL or MariaDB
  zk://h1:2181,h2:2181[/prefix]               ZooKeeper (zks:// for TLS)
  Network URLs take ?ca=FILE&cert=FILE&key=FILE for TLS and
  ?password_file=FILE or ?password_env=VAR to keep the password out of the URL.

` + exitCodesHelp,
		Example: `  baton run -n nightly-backup /usr/local/bin/backup
  baton run -w 30s build-cache make -j8
  baton sem -j 4 gpu -- python train.py
  BATON_BACKEND=redis://10.0.0.5:6379 baton run deploy ./deploy.sh
  baton ls`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.PersistentFlags().String("backend", "", "backend `URL` (default $BATON_BACKEND, else local:)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: err}
	})
	root.AddCommand(newRunCmd(), newSemCmd(), newStatusCmd(), newLsCmd(), newRmCmd(), newLockCmd())
	root.AddCommand(newTopCmd(), newServeCmd())
	root.AddCommand(newQueueCmd(), newWorkCmd())
	root.AddCommand(newElectCmd())
	root.AddCommand(newChanCmd())
	root.Version = version()
	root.CompletionOptions.HiddenDefaultCmd = false
	useOwnBashCompletion(root)
	return root
}
