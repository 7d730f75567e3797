//go:build linux

// Command bench measures baton's backends side by side with their peers in
// one run: sync.Mutex, gofrs/flock, raw flock(2) and System V semop(2),
// redsync, bsm/redislock, a raw SET NX + EVAL floor (and its Redlock over
// 3 nodes), and etcd's concurrency.Mutex. Every figure is measured several times, interleaved
// with the peers (A B A B ...), and reported as the median with its range
// and as a ratio to the peer.
//
//	go run . -quick   # a few minutes; prints the ratio tables
//	go run . -full    # everything; writes BENCH.md, results.json, charts/
//
// The run starts its own redis-server processes and an embedded etcd on
// loopback ports, and removes every file and System V object it created.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	if ok, code := workerMain(); ok {
		os.Exit(code)
	}
	quick := flag.Bool("quick", false, "quick pass (a few minutes)")
	full := flag.Bool("full", false, "full pass (every workload, longer runs)")
	out := flag.String("out", "", "directory for BENCH.md, results.json and charts/ (default: . for -full, out-quick for -quick)")
	only := flag.String("only", "", "comma-separated sections to run: host, redis, etcd, memory (default all)")
	report := flag.String("report", "", "render BENCH.md and charts/ again from this results.json into -out (default .), without measuring")
	flag.Parse()
	if *report != "" {
		if err := rerender(*report, *out); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *quick == *full {
		fmt.Fprintln(os.Stderr, "bench: give exactly one of -quick or -full")
		os.Exit(2)
	}
	cfg, mode := quickConfig, "quick"
	if *full {
		cfg, mode = fullConfig, "full"
	}
	if *out == "" {
		*out = "out-quick"
		if *full {
			*out = "."
		}
	}
	cmd := "cd bench && go run . " + strings.Join(os.Args[1:], " ")
	res, err := run(context.Background(), cfg, mode, sections(*only), cmd, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
	}
	if res != nil {
		if werr := writeOutputs(res, *out); werr != nil {
			fmt.Fprintln(os.Stderr, "bench:", werr)
			os.Exit(1)
		}
		fmt.Printf("\nwrote %s, %s and %s\n", filepath.Join(*out, "BENCH.md"), filepath.Join(*out, "results.json"), filepath.Join(*out, "charts"))
	}
	if err != nil {
		os.Exit(1)
	}
}

func rerender(path, out string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var res results
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if out == "" {
		out = "."
	}
	return writeOutputs(&res, out)
}

func sections(only string) map[string]bool {
	m := map[string]bool{}
	if only == "" {
		for _, s := range []string{"host", "redis", "etcd", "memory"} {
			m[s] = true
		}
		return m
	}
	for _, s := range strings.Split(only, ",") {
		m[strings.TrimSpace(s)] = true
	}
	return m
}

// run performs a pass and returns every table, also when a part failed
// (the error says which).
func run(ctx context.Context, cfg config, mode string, want map[string]bool, cmd string, log *os.File) (*results, error) {
	logf := func(format string, args ...any) { fmt.Fprintf(log, format+"\n", args...) }
	res := &results{Mode: mode, Command: cmd, Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Config: cfgJSON(cfg)}
	var errs []error

	dir, err := os.MkdirTemp(tmpBase(), "baton-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	he, err := openHostEnv(dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := he.close(); err != nil {
			logf("closing same-host backends: %v", err)
		}
		if err := removeHostObjects(dir); err != nil {
			logf("removing System V objects: %v", err)
		}
	}()

	var ce *clusterEnv
	if want["redis"] || want["etcd"] || want["memory"] {
		ce, err = openClusterEnv(ctx, cfg.poll, want["redis"] || want["memory"], want["etcd"] || want["memory"], logf)
		if err != nil {
			errs = append(errs, fmt.Errorf("cluster servers: %w", err))
			ce = &clusterEnv{}
		}
		defer ce.close()
	} else {
		ce = &clusterEnv{}
	}

	for _, t := range plan(cfg, he, ce, dir, want) {
		started := time.Now()
		runTable(ctx, cfg, t)
		res.Tables = append(res.Tables, t.table)
		printTable(log, t.table)
		logf("  (%s)", time.Since(started).Round(time.Millisecond))
		for _, r := range t.table.Rows {
			if r.Err != "" {
				errs = append(errs, fmt.Errorf("%s / %s: %s", t.table.ID, r.Subject, r.Err))
			}
		}
	}
	return res, errors.Join(errs...)
}

// tmpBase prefers tmpfs, where the namespace of same-host primitives lives
// by default.
func tmpBase() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return ""
}

// runTable runs every subject of t cfg.reps times, interleaved.
func runTable(ctx context.Context, cfg config, t *plannedTable) {
	rows := t.table.Rows
	for rep := 0; rep < t.reps(cfg); rep++ {
		for i, s := range t.subjects {
			r := rows[i]
			if r.Err != "" {
				continue
			}
			smp, err := runGuarded(ctx, cfg, t, s)
			if err != nil {
				r.Err = err.Error()
				continue
			}
			r.Samples = append(r.Samples, smp)
		}
	}
	if t.done != nil {
		t.done()
	}
	finishTable(t.table)
}

// runGuarded bounds one run: a subject that hangs is reported, not waited
// for forever.
func runGuarded(ctx context.Context, cfg config, t *plannedTable, s *subject) (sample, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		s   sample
		err error
	}
	done := make(chan result, 1)
	go func() {
		smp, err := t.run(ctx, s)
		done <- result{smp, err}
	}()
	limit := 20*cfg.dur + 60*time.Second
	select {
	case r := <-done:
		return r.s, r.err
	case <-time.After(limit):
		return sample{}, fmt.Errorf("no result within %s", limit)
	}
}
