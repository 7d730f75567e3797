package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/batonlock/baton"
	"github.com/spf13/cobra"
)

func newRmCmd() *cobra.Command {
	var kind string
	var force, all bool
	cmd := &cobra.Command{
		Use:   "rm [flags] NAME | rm --all [flags] PREFIX",
		Short: "Remove the object NAME, or every object whose name starts with PREFIX",
		Long: `Remove every object named NAME (or only the one of --kind); with --all,
every object whose name starts with PREFIX ("" for all of them).

An object that someone holds is not removed without --force: rm names its
holders and exits 1. With --force, processes that still hold it see their
holds lost where the backend can tell them (a baton holding it exits 75
after stopping its command). Exits 1 when there is no object of that name
(or prefix).`,
		Example: `  baton rm build-cache
  baton rm --force --kind semaphore gpu
  baton rm --all ci/`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if all {
				return removeAll(cmd, kind, args[0], force)
			}
			return withObjects(cmd, kind, args[0], func(ctx context.Context, in baton.Inspector, raw string, found []baton.Info) error {
				if len(found) == 0 {
					return exitWith(exitNotFound, fmt.Errorf("no object named %q on %s", args[0], baton.RedactURL(raw)))
				}
				return removeFound(ctx, in, found, force)
			})
		},
	}
	cmd.Flags().StringVar(&kind, "kind", "", "only this kind: mutex, rwmutex, semaphore, cond, queue, channel")
	cmd.Flags().BoolVarP(&force, "force", "f", false, "remove objects that are held too; their holders lose them")
	cmd.Flags().BoolVar(&all, "all", false, "remove every object whose name starts with the argument, a PREFIX")
	return cmd
}

// removeFound removes the objects of found, those held only with force. A
// held object left in place is named on stderr and makes rm exit 1.
func removeFound(ctx context.Context, in baton.Inspector, found []baton.Info, force bool) error {
	kept := 0
	for _, info := range found {
		if len(info.Holders) > 0 && !force {
			kept++
			fmt.Fprintf(os.Stderr, "baton: %s %q is held by %s; not removed (--force removes it, and its holders lose it)\n",
				info.Kind, info.Name, holderText(info.Holders[0]))
			continue
		}
		if err := in.Remove(ctx, info.Kind, info.Name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return classify(err)
		}
	}
	if kept > 0 {
		return exitWith(exitConflict, nil)
	}
	return nil
}

// removeAll removes the objects whose names start with prefix.
func removeAll(cmd *cobra.Command, kind, prefix string, force bool) error {
	kinds, err := parseKind(kind)
	if err != nil {
		return err
	}
	return withInspector(cmd, inspectTimeout, func(ctx context.Context, in baton.Inspector, raw string) error {
		infos, err := in.List(ctx)
		if err != nil {
			return classify(err)
		}
		var found []baton.Info
		for _, info := range infos {
			if strings.HasPrefix(info.Name, prefix) && slices.Contains(kinds, info.Kind) {
				found = append(found, info)
			}
		}
		if len(found) == 0 {
			return exitWith(exitNotFound, fmt.Errorf("no object whose name starts with %q on %s", prefix, baton.RedactURL(raw)))
		}
		return removeFound(ctx, in, found, force)
	})
}
