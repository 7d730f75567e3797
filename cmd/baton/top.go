package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/batonlock/baton"
	"github.com/spf13/cobra"
)

const topLong = `Show every object of the backend with its holders (pid, host, owner,
mode, token, how long held, lease time left) and how many wait, refreshed
every --interval, in the manner of top(1). The owner is shown where the
backend records it: the owner (within its process) of a futex mutex hold,
the id of the holding client on ZooKeeper and MySQL.

--sort orders the objects: wait (most waiters first, the default), held
(longest held first) or name. On a terminal the keys w, h and n change the
order and q quits; Ctrl-C quits too. --once prints one screen and exits.`

func newTopCmd() *cobra.Command {
	var interval time.Duration
	var sortKey string
	var once bool
	cmd := &cobra.Command{
		Use:   "top [flags]",
		Short: "Show holders and waiters of every object, refreshing",
		Long:  topLong,
		Example: `  baton top
  baton top --sort held --interval 500ms
  BATON_BACKEND=redis://10.0.0.5:6379 baton top --once`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkSort(sortKey); err != nil {
				return err
			}
			if interval < 50*time.Millisecond {
				return usageErrorf("--interval %v: at least 50ms", interval)
			}
			return runTop(cmd, interval, sortKey, once)
		},
	}
	cmd.Flags().DurationVarP(&interval, "interval", "d", time.Second, "time between refreshes")
	cmd.Flags().StringVar(&sortKey, "sort", "wait", "order: wait, held or name")
	cmd.Flags().BoolVar(&once, "once", false, "print one screen and exit")
	return cmd
}

func runTop(cmd *cobra.Command, interval time.Duration, sortKey string, once bool) error {
	return live(cmd, func(ctx context.Context, in baton.Inspector, raw string) error {
		out := cmd.OutOrStdout()
		if once {
			return topFrame(ctx, out, in, raw, sortKey, false)
		}
		f, isFile := out.(*os.File)
		tty := isFile && isTerminal(int(f.Fd()))
		keys := make(chan byte, 8)
		if restore, ok := keyboard(keys); ok {
			defer restore()
		}
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if err := topFrame(ctx, out, in, raw, sortKey, tty); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			case k := <-keys:
				switch k {
				case 'q', 'Q':
					return nil
				case 'w':
					sortKey = "wait"
				case 'h':
					sortKey = "held"
				case 'n':
					sortKey = "name"
				}
			}
		}
	})
}

// topFrame writes one screen: a header and the table, after clearing the
// terminal when tty.
func topFrame(ctx context.Context, w io.Writer, in baton.Inspector, raw, sortKey string, tty bool) error {
	lctx, cancel := context.WithTimeout(ctx, inspectTimeout)
	infos, now, err := snapshot(lctx, in, sortKey)
	cancel()
	if ctx.Err() != nil {
		return nil
	}
	var buf bytes.Buffer
	if tty {
		buf.WriteString("\x1b[H\x1b[2J")
	}
	held, waiting := 0, 0
	for _, i := range infos {
		if len(i.Holders) > 0 {
			held++
		}
		waiting += max(i.Waiters, 0)
	}
	fmt.Fprintf(&buf, "baton top  %s  %s  sort: %s", baton.RedactURL(raw), now.Format("15:04:05"), sortKey)
	if tty {
		buf.WriteString("  (keys: w h n sort, q quit)")
	}
	fmt.Fprintf(&buf, "\n%d objects, %d held, %d waiting\n", len(infos), held, waiting)
	if err != nil {
		fmt.Fprintf(&buf, "error: %s\n", strings.TrimPrefix(err.Error(), "baton: "))
	}
	buf.WriteByte('\n')
	writeLive(&buf, infos, now)
	if !tty {
		buf.WriteByte('\n')
	}
	_, werr := w.Write(buf.Bytes())
	return werr
}
