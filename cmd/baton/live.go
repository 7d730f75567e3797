package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/queuedetail"
)

// The live view that baton top and baton serve share: the objects of a
// backend as its Inspector lists them, sorted by what an operator looks
// for first.

// sortKeys are the orders of the live view; the first is the default.
var sortKeys = []string{"wait", "held", "name"}

// checkSort validates a --sort value.
func checkSort(s string) error {
	if !slices.Contains(sortKeys, s) {
		return usageErrorf("--sort %q: want %s", s, strings.Join(sortKeys, ", "))
	}
	return nil
}

// heldFor is how long the oldest holder of in has held it (0: free or
// unknown).
func heldFor(in baton.Info, now time.Time) time.Duration {
	var d time.Duration
	for _, h := range in.Holders {
		if !h.Since.IsZero() {
			d = max(d, now.Sub(h.Since))
		}
	}
	return d
}

// sortInfos orders infos by key: "wait" (most waiters first), "held"
// (longest held first) or "name"; ties by name and kind.
func sortInfos(infos []baton.Info, key string, now time.Time) {
	slices.SortStableFunc(infos, func(a, b baton.Info) int {
		var c int
		switch key {
		case "wait":
			c = cmp.Compare(b.Waiters, a.Waiters)
		case "held":
			c = cmp.Compare(heldFor(b, now), heldFor(a, now))
		}
		if c != 0 {
			return c
		}
		if c = strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(string(a.Kind), string(b.Kind))
	})
}

// snapshot lists the objects of in, sorted by key.
func snapshot(ctx context.Context, in baton.Inspector, key string) ([]baton.Info, time.Time, error) {
	infos, err := in.List(ctx)
	now := time.Now()
	if err != nil && len(infos) == 0 {
		return nil, now, err
	}
	sortInfos(infos, key, now)
	return infos, now, err
}

// orDash returns s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ago renders a duration for the live view: "-" when unknown.
func ago(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// writeLive writes the table of the live view: one line per holder, and
// one for an object that no one holds; the waiters on the object's first
// line.
func writeLive(w io.Writer, infos []baton.Info, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tWAITERS\tPID\tHOST\tOWNER\tMODE\tTOKEN\tHELD FOR\tLEASE LEFT")
	for _, in := range infos {
		kind := string(in.Kind)
		if in.Capacity > 0 {
			kind += fmt.Sprintf("/%d", in.Capacity)
		}
		if in.Kind == baton.KindQueue && in.Detail != "" {
			kind += " (" + in.Detail + ")" // the counts by state
		}
		waiters := "?"
		if in.Waiters >= 0 {
			waiters = fmt.Sprint(in.Waiters)
		}
		if len(in.Holders) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\tfree\t-\t-\t-\n", in.Name, kind, waiters)
			continue
		}
		for i, h := range in.Holders {
			name := in.Name
			if i > 0 {
				name, kind, waiters = "", "", ""
			}
			pid, token, mode := "-", "-", orDash(h.Mode)
			if h.PID > 0 {
				pid = fmt.Sprint(h.PID)
			}
			if h.Token > 0 {
				token = fmt.Sprint(h.Token)
			}
			if h.N > 0 {
				mode = fmt.Sprintf("%d permits", h.N)
			}
			var held time.Duration
			if !h.Since.IsZero() {
				held = now.Sub(h.Since)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, kind, waiters, pid, orDash(h.Host), orDash(h.Owner), mode, token, ago(held), ago(h.TTL))
		}
	}
	_ = tw.Flush()
	writeQueues(w, infos)
}

// writeQueues writes the table of the queues among infos, as the status
// page shows them; nothing when there is none.
func writeQueues(w io.Writer, infos []baton.Info) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := false
	for _, in := range infos {
		c, ok := queuedetail.Parse(in)
		if !ok {
			continue
		}
		if !head {
			fmt.Fprintln(tw, "\nQUEUE\tREADY\tDELAYED\tIN FLIGHT\tDEAD\tOLDEST READY")
			head = true
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", in.Name, c.Ready, c.Delayed, c.InFlight, c.Dead, ago(c.Oldest))
	}
	_ = tw.Flush()
}
