package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/batonlock/baton"
	"github.com/spf13/cobra"
)

// The queue commands: put jobs, and look after a queue (counts, dead
// letters). `baton work` (work.go) runs a command per job.

func newQueueCmd() *cobra.Command {
	q := &cobra.Command{
		Use:   "queue",
		Short: "Put jobs into a work queue; show its counts; list, requeue or purge its dead letters",
		Long: `A work queue holds jobs (a payload each) that workers claim, do and
acknowledge; see 'baton work' for a worker that runs a command per job, and
package baton's Queue for programs. A job is claimed by one live worker at
a time; a worker that dies gives its job back; a job that failed on every
one of its attempts becomes a dead letter.

` + exitCodesHelp,
		Example: `  baton queue put thumbnails photo-1.jpg
  echo '{"to":"ann"}' | baton queue put --key welcome/ann --attempts 5 mail -
  baton queue put --delay 10m reminders "call back"
  baton queue stats thumbnails
  baton queue dead mail
  baton queue requeue --all mail`,
	}
	q.AddCommand(newQueuePutCmd(), newQueueStatsCmd(), newQueueDeadCmd(),
		newQueueByIDCmd("requeue", "Make dead letters ready again, their attempts counted from zero"),
		newQueueByIDCmd("purge", "Delete dead letters"))
	return q
}

// withQueue validates name and the backend URL, opens the queue and runs
// fn with a context that a signal cancels.
func withQueue(cmd *cobra.Command, name string, fn func(ctx context.Context, q baton.Queue) error) error {
	if err := baton.ValidateName(name); err != nil {
		return usageErrorf("%s", strings.TrimPrefix(err.Error(), "baton: "))
	}
	raw := backendURL(cmd)
	if err := checkBackendURL(raw); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), caughtSignals...)
	defer stop()
	q, closeQueue, err := openQueue(ctx, raw, name)
	if err != nil {
		return err
	}
	defer closeQueue()
	return queueErr(fn(ctx, q))
}

// openQueue opens the backend raw and its queue name; closeQueue closes
// both.
func openQueue(ctx context.Context, raw, name string) (q baton.Queue, closeQueue func(), err error) {
	b, err := openBackend(ctx, raw, backendOptions{})
	if err != nil {
		return nil, nil, exitWith(exitBackend, err)
	}
	if q, err = b.Queue(ctx, name); err != nil {
		closeBackend(b, releaseTimeout)
		return nil, nil, queueErr(err)
	}
	return q, func() {
		_ = q.Close()
		closeBackend(b, releaseTimeout)
	}, nil
}

// queueErr gives an error of a queue call its exit code.
func queueErr(err error) error {
	var ee *exitError
	switch {
	case err == nil || errors.As(err, &ee):
		return err
	case errors.Is(err, baton.ErrInvalidArgument), errors.Is(err, baton.ErrInvalidName):
		return &exitError{code: exitUsage, err: err}
	case errors.Is(err, baton.ErrFull):
		return &exitError{code: exitConflict, err: err}
	}
	return exitWith(exitBackend, err)
}

func newQueuePutCmd() *cobra.Command {
	var (
		delay    durationFlag
		key      string
		attempts int
	)
	cmd := &cobra.Command{
		Use:   "put [flags] NAME [DATA | -]",
		Short: "Put a job; its payload is DATA, or standard input (- or no DATA); print its id",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var opts []baton.PutOption
			if delay.set {
				opts = append(opts, baton.Delay(delay.d))
			}
			if cmd.Flags().Changed("key") {
				opts = append(opts, baton.UniqueKey(key))
			}
			if cmd.Flags().Changed("attempts") {
				opts = append(opts, baton.MaxAttempts(attempts))
			}
			var payload []byte
			if len(args) == 2 && args[1] != "-" {
				payload = []byte(args[1])
			}
			return withQueue(cmd, args[0], func(ctx context.Context, q baton.Queue) error {
				if payload == nil {
					// One byte more than the limit, so that the core
					// refuses an oversized payload with its own error.
					data, err := io.ReadAll(io.LimitReader(os.Stdin, int64(q.MaxPayload())+1))
					if err != nil {
						return exitWith(exitUsage, fmt.Errorf("reading the payload: %v", err))
					}
					payload = data
				}
				id, err := q.Put(ctx, payload, opts...)
				if err != nil {
					return err
				}
				fmt.Println(id)
				return nil
			})
		},
	}
	cmd.Flags().Var(&delay, "delay", "make the job ready after `DUR` (seconds, or 500ms, 2m)")
	cmd.Flags().StringVar(&key, "key", "", "uniqueness `KEY`: while a job with it is pending, put nothing and print that job's id")
	cmd.Flags().IntVar(&attempts, "attempts", baton.DefaultMaxAttempts, "claims before the job becomes a dead letter")
	return cmd
}

func newQueueStatsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats [--json] NAME",
		Short: "Count a queue's jobs: ready, delayed, in flight, dead",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withQueue(cmd, args[0], func(ctx context.Context, q baton.Queue) error {
				s, err := q.Stats(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					return json.NewEncoder(os.Stdout).Encode(struct {
						Name string `json:"name"`
						baton.QueueStats
					}{args[0], s})
				}
				fmt.Printf("ready %d  delayed %d  in flight %d  dead %d\n", s.Ready, s.Delayed, s.InFlight, s.Dead)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newQueueDeadCmd() *cobra.Command {
	var (
		asJSON bool
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "dead [--json] [--limit N] NAME",
		Short: "List a queue's dead letters, oldest first: id, attempts, when, reason, payload",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withQueue(cmd, args[0], func(ctx context.Context, q baton.Queue) error {
				ds, err := q.Dead(ctx, limit)
				if err != nil {
					return err
				}
				if asJSON {
					return json.NewEncoder(os.Stdout).Encode(ds)
				}
				for _, d := range ds {
					p := string(d.Payload)
					if len(p) > 60 {
						p = p[:60] + "…"
					}
					fmt.Printf("%d\t%d\t%s\t%q\t%q\n", d.ID, d.Attempts, d.At.Format(time.RFC3339), d.Reason, p)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().IntVar(&limit, "limit", 100, "list at most `N`")
	return cmd
}

// newQueueByIDCmd is requeue or purge: of the dead letters with the ids
// given, or of every one with --all.
func newQueueByIDCmd(op, short string) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   op + " NAME (ID... | --all)",
		Short: short,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 1) {
				return usageErrorf("give job ids or --all, not both or neither")
			}
			var ids []baton.JobID
			for _, a := range args[1:] {
				n, err := strconv.ParseUint(a, 10, 64)
				if err != nil {
					return usageErrorf("job id %q is not a number", a)
				}
				ids = append(ids, baton.JobID(n))
			}
			return withQueue(cmd, args[0], func(ctx context.Context, q baton.Queue) error {
				if all {
					ds, err := q.Dead(ctx, 1<<30)
					if err != nil {
						return err
					}
					if len(ds) == 0 {
						fmt.Println(0)
						return nil
					}
					for _, d := range ds {
						ids = append(ids, d.ID)
					}
				}
				do := q.Requeue
				if op == "purge" {
					do = q.Purge
				}
				n, err := do(ctx, ids...)
				if err != nil {
					return err
				}
				fmt.Println(n)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "every dead letter")
	return cmd
}
