package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/batonlock/baton"
	"github.com/spf13/cobra"
)

// jsonSchema is the version of the --json output. It changes only when a
// field changes meaning, form or goes away; new fields may appear within a
// version. Schema 2 writes tokens as decimal strings: tokens go past 2^53,
// where readers that keep JSON numbers as doubles (jq, JavaScript) round
// them.
const jsonSchema = 2

// inspector opens the backend of cmd and returns it as an Inspector.
func inspector(ctx context.Context, cmd *cobra.Command) (baton.Backend, baton.Inspector, string, error) {
	raw := backendURL(cmd)
	setLogger(false)
	b, err := openBackend(ctx, raw, backendOptions{})
	if err != nil {
		return nil, nil, raw, err
	}
	in, ok := b.(baton.Inspector)
	if !ok {
		closeBackend(b, releaseTimeout)
		return nil, nil, raw, exitWith(exitBackend, fmt.Errorf("backend %s cannot list or remove its objects (status, ls and rm are not supported by it)%w", baton.RedactURL(raw), silent{baton.ErrUnsupported}))
	}
	return b, in, raw, nil
}

var allKinds = []baton.Kind{baton.KindMutex, baton.KindRWMutex, baton.KindSemaphore, baton.KindCond, baton.KindQueue}

func parseKind(s string) ([]baton.Kind, error) {
	if s == "" {
		return allKinds, nil
	}
	k := baton.Kind(s)
	// Channels are named only by --kind: not every backend knows the kind.
	if !slices.Contains(allKinds, k) && k != baton.KindChannel {
		return nil, usageErrorf("--kind %q: want mutex, rwmutex, semaphore, cond, queue or channel", s)
	}
	return []baton.Kind{k}, nil
}

// withInspector opens the backend of cmd as an Inspector and calls fn with
// it, all within timeout.
func withInspector(cmd *cobra.Command, timeout time.Duration, fn func(ctx context.Context, in baton.Inspector, raw string) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	b, in, raw, err := inspector(ctx, cmd)
	if err != nil {
		return err
	}
	defer closeBackend(b, releaseTimeout)
	return fn(ctx, in, raw)
}

// live opens the backend of cmd as an Inspector within inspectTimeout and
// calls fn with a context that ends at SIGINT or SIGTERM: the frame of the
// live views, top and serve. A backend that cannot be opened (exit 70)
// is opened again at each refresh.
func live(cmd *cobra.Command, fn func(ctx context.Context, in baton.Inspector, raw string) error) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	octx, cancel := context.WithTimeout(ctx, inspectTimeout)
	b, in, raw, err := inspector(octx, cmd)
	cancel()
	var ee *exitError
	if errors.As(err, &ee) && ee.code == exitBackend && !errors.Is(err, baton.ErrUnsupported) {
		// The backend is down (or does not answer): show that, and
		// show it up once it answers.
		r := &reopening{raw: raw}
		defer r.close()
		return fn(ctx, r, raw)
	}
	if err != nil {
		return err
	}
	defer closeBackend(b, releaseTimeout)
	return fn(ctx, in, raw)
}

// withObjects validates kind and name, opens the backend's Inspector, finds
// the objects called name (of kind, or of every kind) and calls fn with them.
func withObjects(cmd *cobra.Command, kind, name string, fn func(ctx context.Context, in baton.Inspector, raw string, found []baton.Info) error) error {
	kinds, err := parseKind(kind)
	if err != nil {
		return err
	}
	if err := baton.ValidateName(name); err != nil {
		return usageErrorf("%s", strings.TrimPrefix(err.Error(), "baton: "))
	}
	return withInspector(cmd, inspectTimeout, func(ctx context.Context, in baton.Inspector, raw string) error {
		found, err := find(ctx, in, kinds, name)
		if err != nil {
			return err
		}
		return fn(ctx, in, raw, found)
	})
}

// find returns the objects named name among kinds.
func find(ctx context.Context, in baton.Inspector, kinds []baton.Kind, name string) ([]baton.Info, error) {
	var found []baton.Info
	for _, k := range kinds {
		info, err := in.Inspect(ctx, k, name)
		switch {
		case err == nil:
			found = append(found, info)
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, baton.ErrUnsupported):
		default:
			return nil, classify(err)
		}
	}
	return found, nil
}

const inspectTimeout = 10 * time.Second

func newStatusCmd() *cobra.Command {
	var asJSON bool
	var kind string
	cmd := &cobra.Command{
		Use:   "status [flags] NAME",
		Short: "Show the holders and waiters of NAME",
		Long: `Show every object named NAME (lock, semaphore, condition variable): its
holders (pid, host, mode, token, age, lease time left where there is one) and
how many wait. Exits 1 when the backend has no object of that name.

--json prints {"schema":2,"backend":URL,"objects":[...]}; see docs/CLI.md.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withObjects(cmd, kind, args[0], func(ctx context.Context, in baton.Inspector, raw string, found []baton.Info) error {
				if asJSON {
					if err := writeJSON(cmd.OutOrStdout(), raw, found); err != nil {
						return err
					}
				} else {
					writeText(cmd.OutOrStdout(), found)
				}
				if len(found) == 0 {
					if !asJSON {
						return exitWith(exitNotFound, fmt.Errorf("no object named %q on %s", args[0], baton.RedactURL(raw)))
					}
					return exitWith(exitNotFound, nil)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (schema 2)")
	cmd.Flags().StringVar(&kind, "kind", "", "only this kind: mutex, rwmutex, semaphore, cond, queue, channel")
	return cmd
}

func newLsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls [flags]",
		Short: "List the objects of the backend and who holds them",
		Long: `List every object of the backend with its kind, holders and waiters.

--json prints {"schema":2,"backend":URL,"objects":[...]}; see docs/CLI.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withInspector(cmd, inspectTimeout, func(ctx context.Context, in baton.Inspector, raw string) error {
				infos, err := in.List(ctx)
				if err != nil {
					return classify(err)
				}
				slices.SortFunc(infos, func(a, b baton.Info) int {
					if c := strings.Compare(a.Name, b.Name); c != 0 {
						return c
					}
					return strings.Compare(string(a.Kind), string(b.Kind))
				})
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), raw, infos)
				}
				writeTable(cmd.OutOrStdout(), infos)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (schema 2)")
	return cmd
}

// printNotice prints the line shown when a wait takes long: what baton
// waits for and, when the backend can tell, who holds it.
func printNotice(ctx context.Context, r *request, tty bool) {
	line := "baton: waiting for " + describe(r)
	if who := holdersOf(ctx, r); who != "" {
		line += ", held by " + who
	}
	if tty {
		line += " (Ctrl-C to give up)"
	}
	fmt.Fprintln(os.Stderr, line)
}

// holdersOf asks the backend who holds what r waits for; "" when it cannot
// tell. It opens a second backend handle so that the waiting one is left
// alone, and gives up quickly.
func holdersOf(ctx context.Context, r *request) string {
	if r.file != "" {
		return "" // a file lock: the backend knows nothing of it
	}
	ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	b, err := openBackend(ctx, r.backend, backendOptions{})
	if err != nil {
		return ""
	}
	defer closeBackend(b, releaseTimeout)
	in, ok := b.(baton.Inspector)
	if !ok {
		return ""
	}
	kinds := []baton.Kind{baton.KindRWMutex, baton.KindMutex}
	if r.sem > 0 {
		kinds = []baton.Kind{baton.KindSemaphore}
	}
	var info baton.Info
	for _, k := range kinds {
		if info, err = in.Inspect(ctx, k, r.name); err == nil {
			break
		}
	}
	if err != nil || len(info.Holders) == 0 {
		return ""
	}
	hs := make([]string, 0, len(info.Holders))
	for i, h := range info.Holders {
		if i == 3 {
			hs = append(hs, fmt.Sprintf("and %d more", len(info.Holders)-3))
			break
		}
		hs = append(hs, holderText(h))
	}
	s := strings.Join(hs, "; ")
	if info.Waiters > 0 {
		s += fmt.Sprintf("; %d waiting", info.Waiters)
	}
	return s
}

// completeNames completes NAME from the objects of the backend.
func completeNames(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveDefault
	}
	var names []cobra.Completion
	_ = withInspector(cmd, 2*time.Second, func(ctx context.Context, in baton.Inspector, _ string) error {
		infos, err := in.List(ctx)
		if err != nil {
			return err
		}
		for _, info := range infos {
			if strings.HasPrefix(info.Name, toComplete) && !slices.Contains(names, info.Name) {
				names = append(names, info.Name)
			}
		}
		return nil
	})
	return names, cobra.ShellCompDirectiveNoFileComp
}
