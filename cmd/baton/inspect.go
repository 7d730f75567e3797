package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
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

// jsonReport is the --json output of status and ls.
type jsonReport struct {
	Schema  int          `json:"schema"`
	Backend string       `json:"backend"`
	Objects []jsonObject `json:"objects"`
}

type jsonObject struct {
	Name      string       `json:"name"`
	Kind      baton.Kind   `json:"kind"`
	Backend   string       `json:"backend"`
	Impl      string       `json:"impl,omitempty"`
	Holders   []jsonHolder `json:"holders"`
	Waiters   int          `json:"waiters"` // -1 when unknown
	Capacity  int64        `json:"capacity,omitempty"`
	LastToken uint64       `json:"last_token,omitempty,string"`
	Detail    string       `json:"detail,omitempty"`
}

type jsonHolder struct {
	PID        int      `json:"pid,omitempty"`
	Host       string   `json:"host,omitempty"`
	Since      string   `json:"since,omitempty"`       // RFC 3339, when known
	AgeSeconds *float64 `json:"age_seconds,omitempty"` // when Since is known
	Token      uint64   `json:"token,omitempty,string"`
	Mode       string   `json:"mode,omitempty"`
	N          int64    `json:"n,omitempty"`
	TTLSeconds *float64 `json:"ttl_seconds,omitempty"` // lease time left, lease backends
}

func toJSON(in baton.Info, now time.Time) jsonObject {
	o := jsonObject{Name: in.Name, Kind: in.Kind, Backend: in.Backend, Impl: in.Impl,
		Holders: []jsonHolder{}, Waiters: in.Waiters, Capacity: in.Capacity,
		LastToken: uint64(in.LastToken), Detail: in.Detail}
	for _, h := range in.Holders {
		j := jsonHolder{PID: h.PID, Host: h.Host, Token: uint64(h.Token), Mode: h.Mode, N: h.N}
		if !h.Since.IsZero() {
			j.Since = h.Since.UTC().Format(time.RFC3339Nano)
			age := now.Sub(h.Since).Seconds()
			j.AgeSeconds = &age
		}
		if h.TTL > 0 {
			ttl := h.TTL.Seconds()
			j.TTLSeconds = &ttl
		}
		o.Holders = append(o.Holders, j)
	}
	return o
}

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
		return nil, nil, raw, exitWith(exitBackend, fmt.Errorf("backend %s cannot list or remove its objects (status, ls and rm are not supported by it)", baton.RedactURL(raw)))
	}
	return b, in, raw, nil
}

var allKinds = []baton.Kind{baton.KindMutex, baton.KindRWMutex, baton.KindSemaphore, baton.KindCond}

func parseKind(s string) ([]baton.Kind, error) {
	if s == "" {
		return allKinds, nil
	}
	k := baton.Kind(s)
	if !slices.Contains(allKinds, k) {
		return nil, usageErrorf("--kind %q: want mutex, rwmutex, semaphore or cond", s)
	}
	return []baton.Kind{k}, nil
}

// find returns the objects named name among kinds.
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
	ctx, cancel := context.WithTimeout(context.Background(), inspectTimeout)
	defer cancel()
	b, in, raw, err := inspector(ctx, cmd)
	if err != nil {
		return err
	}
	defer closeBackend(b, releaseTimeout)
	found, err := find(ctx, in, kinds, name)
	if err != nil {
		return err
	}
	return fn(ctx, in, raw, found)
}

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
	cmd.Flags().StringVar(&kind, "kind", "", "only this kind: mutex, rwmutex, semaphore, cond")
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
			ctx, cancel := context.WithTimeout(context.Background(), inspectTimeout)
			defer cancel()
			b, in, raw, err := inspector(ctx, cmd)
			if err != nil {
				return err
			}
			defer closeBackend(b, releaseTimeout)
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
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (schema 2)")
	return cmd
}

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
	cmd.Flags().StringVar(&kind, "kind", "", "only this kind: mutex, rwmutex, semaphore, cond")
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
	ctx, cancel := context.WithTimeout(context.Background(), inspectTimeout)
	defer cancel()
	b, in, raw, err := inspector(ctx, cmd)
	if err != nil {
		return err
	}
	defer closeBackend(b, releaseTimeout)
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
}

func writeJSON(w io.Writer, raw string, infos []baton.Info) error {
	now := time.Now()
	rep := jsonReport{Schema: jsonSchema, Backend: baton.RedactURL(raw), Objects: []jsonObject{}}
	for _, in := range infos {
		rep.Objects = append(rep.Objects, toJSON(in, now))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func writeText(w io.Writer, infos []baton.Info) {
	for _, in := range infos {
		fmt.Fprintf(w, "%s  %s", in.Name, in.Kind)
		if in.Capacity > 0 {
			fmt.Fprintf(w, " of %d", in.Capacity)
		}
		impl := in.Backend
		if in.Impl != "" {
			impl += "/" + in.Impl
		}
		fmt.Fprintf(w, "  (%s)", impl)
		if in.LastToken > 0 {
			fmt.Fprintf(w, "  last token %d", in.LastToken)
		}
		if in.Detail != "" {
			fmt.Fprintf(w, "  %s", in.Detail)
		}
		fmt.Fprintln(w)
		if len(in.Holders) == 0 {
			fmt.Fprintln(w, "  free")
		}
		for _, h := range in.Holders {
			fmt.Fprintf(w, "  held by %s\n", holderText(h))
		}
		if in.Waiters >= 0 {
			fmt.Fprintf(w, "  %d waiting\n", in.Waiters)
		}
	}
}

func writeTable(w io.Writer, infos []baton.Info) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tHOLDERS\tWAITERS\tIMPL")
	for _, in := range infos {
		hs := make([]string, 0, len(in.Holders))
		for _, h := range in.Holders {
			hs = append(hs, holderText(h))
		}
		holders := strings.Join(hs, "; ")
		if holders == "" {
			holders = "-"
		}
		waiters := "?"
		if in.Waiters >= 0 {
			waiters = fmt.Sprint(in.Waiters)
		}
		kind := string(in.Kind)
		if in.Capacity > 0 {
			kind += fmt.Sprintf("/%d", in.Capacity)
		}
		impl := in.Backend
		if in.Impl != "" {
			impl += "/" + in.Impl
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", in.Name, kind, holders, waiters, impl)
	}
	_ = tw.Flush()
}

// holderText describes one holder in a few words: "pid 42 on box1,
// exclusive, token 7, for 3s, lease 8s left".
func holderText(h baton.Holder) string {
	var parts []string
	who := "an unknown process"
	if h.PID > 0 {
		who = fmt.Sprintf("pid %d", h.PID)
	}
	if h.Host != "" {
		who += " on " + h.Host
	}
	parts = append(parts, who)
	if h.Mode != "" {
		parts = append(parts, h.Mode)
	}
	if h.N > 0 {
		parts = append(parts, fmt.Sprintf("%d permits", h.N))
	}
	if h.Token > 0 {
		parts = append(parts, fmt.Sprintf("token %d", h.Token))
	}
	if !h.Since.IsZero() {
		parts = append(parts, "for "+time.Since(h.Since).Round(time.Second).String())
	}
	if h.TTL > 0 {
		parts = append(parts, "lease "+h.TTL.Round(100*time.Millisecond).String()+" left")
	}
	return strings.Join(parts, ", ")
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	b, in, _, err := inspector(ctx, cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer closeBackend(b, releaseTimeout)
	infos, err := in.List(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []cobra.Completion
	for _, info := range infos {
		if strings.HasPrefix(info.Name, toComplete) && !slices.Contains(names, info.Name) {
			names = append(names, info.Name)
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
