//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"strings"
)

func markdown(res *results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# baton benchmarks\n\n")
	fmt.Fprintf(&b, "Every backend of baton and its peers, measured side by side in one run (%s pass).\n\n", res.Mode)
	fmt.Fprintf(&b, "- Date: %s\n", res.Date)
	fmt.Fprintf(&b, "- Command: `%s`\n", res.Command)
	fmt.Fprintf(&b, "- Machine: %s, %s CPUs, %s memory, %s, %s/%s\n", res.Machine["cpu"], res.Machine["nproc"],
		res.Machine["memory"], res.Machine["kernel"], res.Machine["go"], res.Machine["goarch"])
	if v := res.Machine["redis"]; v != "" {
		fmt.Fprintf(&b, "- Redis: %s; etcd: embedded server, one member, fsync off\n", v)
	}
	if v := res.Machine["pinning"]; v != "" {
		fmt.Fprintf(&b, "- CPU pinning: %s\n", v)
	}
	cfg, _ := json.Marshal(res.Config)
	fmt.Fprintf(&b, "- Settings: `%s`\n\n", cfg)

	b.WriteString("## Goals\n\n")
	goalsMarkdown(&b, res.Goals)
	b.WriteString(`
A ratio pairs the two rows' runs of the same repetition. From six
repetitions on, it is the median of the per-repetition ratios, with the
distribution-free 95% interval of a median between two order statistics of
them; with fewer, the ratio of medians with a bootstrap interval (each draw
keeps the pairing). "≥ N× the best peer" divides, in each repetition, the
lowest cost among the peers by baton's. A goal is **met** when the
whole interval satisfies it, **not met** when none of it does, and
**undecided** when the interval straddles the goal. While a goal is
undecided, its table runs on, up to twice its most repetitions (the Redis
uncontended table, with the noisy Redlock ratio, four times).

## Machine noise

`)
	noiseMarkdown(&b, res)
	b.WriteString(runningMarkdown)
	b.WriteString(`## How to read the tables

Each subject ran the workload once per repetition, interleaved with the
others (A B C, then B C A, …: each repetition starts one subject further
along, so no subject always runs after the same one). The tables are
filled in rounds, one repetition of every table per round, so that each
table's repetitions are spread over the whole pass and a slow or fast
spell of the machine widens intervals instead of moving one table. A
figure is the
median of the repetitions, with their minimum and maximum in brackets where
shown. Baton's rows are in bold. "cost vs X" divides this row's median cost
by X's, with its 95% interval: time per operation in throughput tables,
median latency in latency tables, bytes in memory tables; below 1 is better
than X. A row that failed says FAILED with its error, and the run that
produced it exited non-zero.

- Before anything is timed, every handle of a run takes and gives back the
  lock a few times, then all at once (connections dialled, pools grown,
  scripts loaded); network tables also run one whole repetition that is
  thrown away. They repeat until every ratio of a baton row to a peer is
  within ±10% or the most repetitions allowed were run (the table says so).
- Each run has two halves. The first is untimed: the clock is read once per
  batch of operations (it costs about 60 ns on some virtual machines, more
  than a futex lock), and gives ops/s, fairness and CPU. The second reads
  the clock around every operation and gives the latencies and worst wait.
- Latency p50/p99/max: one Lock+Unlock cycle (take + give back); in contended
  runs it includes the wait.
- Worst wait: the longest a single Lock (or RLock, Acquire) waited.
- CPU/op: user + system time of the process (and of the server processes
  in the Redis, PostgreSQL, MariaDB and ZooKeeper tables: redis-server,
  postgres with its backends of the moment, mariadbd, the ZooKeeper JVM;
  the embedded etcd server runs inside the process, so etcd rows include it)
  divided by the acquisitions of both halves.
- Fairness: fewest acquisitions of one contender divided by the most.
- Every contender has its own handle (its own connection state), as separate
  processes would; sync.Mutex, sync.RWMutex and the buffered channel are
  shared Go objects, the floor of what any lock can cost. In the
  "goroutines" tables baton's handles share one Backend, and on Redis the
  handles of one Backend pass a Mutex among themselves without the server;
  the "clients" table gives each contender a Backend of its own, and the
  handoff tables put holder and waiter in two Backends.
- PostgreSQL, MariaDB and ZooKeeper are throwaway local servers with their
  data in memory and durability off (fsync off; flush at commit off;
  forceSync=no). The PostgreSQL floor is pg_advisory_lock +
  pg_advisory_unlock on a connection per handle, the MariaDB floor
  GET_LOCK + RELEASE_LOCK likewise; the ZooKeeper peer is the client
  library's own recipe, zk.NewLock, a handle per lock on one session (in the
  "clients" table a session each).
- Polling peers (redsync, bsm/redislock, the raw SET NX floor) retry every
  ` + res.Config["peer_retry_delay"].(string) + `; redsync's default delay is 50–250 ms and bsm/redislock has none.
- The raw Redis floor (SET NX PX, then a compare-and-delete script) gives
  no fencing token and does not check that the server kept its data.
  baton's uncontended Lock is one script (an MGET of the restart marker,
  the hold, the waiter sequence and the token counter; TIME; the counter's
  SET and the hold's) and Unlock another (MGET, DEL), with no PUBLISH. Both
  make as many round trips as the floor; what remains over it is on the
  server, where a script costs a command's time more than the command
  sent alone and each write inside it about a command more, and in the
  client, the lease keeper's two timers per hold and the core's queue
  (cluster/redislock's BenchmarkUncontendedParts splits the cost by
  layer; INFO commandstats gives the server's time per script). In the
  "clients" table every acquisition is a handoff on the server: the
  release script makes the next in line the holder and publishes to it,
  and that client holds on the message, with no round trip of its own.
  Its floor, the raw fair BLPOP line, is a list holding one element that
  Lock pops by BLPOP and Unlock pushes back, the server handing it to the
  client blocked longest: fair, one command each way, and no token, no
  expiry and no recovery from a holder that dies.
- Memory is the Go heap only; kernel objects (files, System V sets, shared
  pages) and server-side memory are not counted.

Which backend for what: on one host, local's defaults (the futex Mutex and
the shared-memory RWMutex and Semaphore) are the fast choice; the System V
RWMutex and Semaphore trade speed for the kernel's undo on exit, and the
flock mechanisms suit files that other tools lock too. Across machines,
Redis gives the lowest latency and etcd the strongest consistency
(lease-bound keys, FIFO by revision) at a few milliseconds per handoff;
PostgreSQL and MariaDB serve programs that already have the database, and
ZooKeeper those that already run an ensemble.

`)
	section := ""
	for _, t := range res.Tables {
		if t.Section != section {
			section = t.Section
			fmt.Fprintf(&b, "## %s\n\n", section)
		}
		fmt.Fprintf(&b, "### %s\n\n", t.Title)
		if t.Note != "" {
			fmt.Fprintf(&b, "%d repetitions; %s.\n\n", t.Reps, t.Note)
		}
		head, cells := t.columns()
		b.WriteString("| " + strings.Join(head, " | ") + " |\n")
		b.WriteString("|" + strings.Repeat(" --- |", len(head)) + "\n")
		for _, c := range cells {
			for i := range c {
				c[i] = strings.ReplaceAll(c[i], "|", "\\|")
			}
			b.WriteString("| " + strings.Join(c, " | ") + " |\n")
		}
		if chartSVG(t) != "" {
			fmt.Fprintf(&b, "\n![%s](charts/%s.svg)\n", html.EscapeString(t.Title), t.ID)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// twins returns the rows that measure a subject a second time.
func twins(res *results) (out []struct {
	t *table
	r *row
}) {
	for _, t := range res.Tables {
		for _, r := range t.Rows {
			if r.TwinOf != "" {
				out = append(out, struct {
					t *table
					r *row
				}{t, r})
			}
		}
	}
	return out
}

func noiseMarkdown(b *strings.Builder, res *results) {
	tw := twins(res)
	if len(tw) == 0 {
		b.WriteString("Not measured in this run: its results have no subject measured twice.\n\n")
		return
	}
	b.WriteString(`The same subject measured twice in the same repetitions, as two rows: on a
machine without noise the second row's cost over the first's is 1. A
baton-vs-peer ratio that differs from 1 by less than this is within what
the machine itself varies.

| table | subject | second ÷ first [95% interval] |
| --- | --- | --- |
`)
	for _, x := range tw {
		cell := "FAILED"
		if iv, ok := x.r.Ratios[x.r.TwinOf]; ok {
			cell = fmtRatio(iv)
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", x.t.Title, x.r.TwinOf, cell)
	}
	b.WriteString("\n")
}

// printNoise writes the twin rows' ratios as text.
func printNoise(w io.Writer, res *results) {
	tw := twins(res)
	if len(tw) == 0 {
		return
	}
	fmt.Fprintln(w, "\nMachine noise (the same subject twice; 1 is no noise)")
	for _, x := range tw {
		cell := "FAILED"
		if iv, ok := x.r.Ratios[x.r.TwinOf]; ok {
			cell = fmtRatio(iv)
		}
		fmt.Fprintf(w, "  %s / %s: %s\n", x.t.ID, x.r.TwinOf, cell)
	}
}

const runningMarkdown = `## Running it

- Quick pass (a few minutes; writes into out-quick/): ` + "`make bench`" + ` or
  ` + "`cd bench && go run . -quick`" + `. Narrow it with ` + "`-only`" + ` (sections
  host, redis, etcd, postgres, mysql, zookeeper, memory, or table ids such
  as redis-uncontended or pg-handoff),
  ` + "`-dur 50ms`" + ` and ` + "`-reps 3`" + `.
- Full pass (about 15 to 20 minutes, up to 25 when every table needs all
  their repetitions; writes BENCH.md, results.json and
  charts/ here): ` + "`make bench-full`" + ` or ` + "`cd bench && go run . -full`" + `.
- Two full passes back to back, then their comparison:

      cd bench && go run . -full -out run1 && go run . -full -out run2 &&
        go run . -compare run1/results.json run2/results.json

  Every baton-vs-peer ratio of the two runs should agree within their
  intervals; the comparison counts those that do not.
- Before and after a change: ` + "`make bench-compare`" + ` runs the quick pass on
  the working tree and compares it with a saved results file
  (` + "`BASE=path/to/results.json`" + `, by default bench/results.json as
  committed on main).
  ` + "`go run . -compare OLD.json NEW.json`" + ` prints every row's change with its
  interval and flags regressions beyond the noise; it exits 1 when it
  flagged one. The ratios to peers are what compare across runs; absolute
  figures compare only between runs on one machine in one state, so for a
  before/after, save a quick pass of main first, on the same machine:
  ` + "`make bench && cp bench/out-quick/results.json /tmp/main.json`" + `, then on the
  change ` + "`make bench-compare BASE=/tmp/main.json`" + `.
- ` + "`-pin`" + ` runs redis-server on one CPU and the clients on the others
  during Redis tables (taskset). It is off by default: tried on a busy
  2-CPU virtual machine, it made every Redis round trip slower and the
  repeated subject no steadier. ` + "`-break NAME`" + `
  makes a subject fail, to see how a failure is reported.

`
