package main

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// jobsFlag is the -j of sem: N, or as GNU sem reads it, +N and -N (the
// number of CPUs plus or minus N) and N% (that share of the CPUs), at
// least 1.
type jobsFlag struct {
	n    int64
	set  bool
	spec string
}

var _ pflag.Value = (*jobsFlag)(nil)

func (f *jobsFlag) String() string { return f.spec }
func (f *jobsFlag) Type() string   { return "N" }

func (f *jobsFlag) Set(s string) error {
	n, err := parseJobs(s, runtime.NumCPU())
	if err != nil {
		return err
	}
	f.n, f.set, f.spec = n, true, s
	return nil
}

// parseJobs reads a -j value for a host of cpus CPUs.
func parseJobs(s string, cpus int) (int64, error) {
	bad := func(why string) (int64, error) {
		return 0, fmt.Errorf("%s; want N, +N, -N (CPUs plus or minus N) or N%% (of the CPUs)", why)
	}
	num := func(t string) (int64, bool) {
		n, err := strconv.ParseInt(t, 10, 64)
		return n, err == nil && n >= 0 && !strings.HasPrefix(t, "+") && !strings.HasPrefix(t, "-")
	}
	var n int64
	switch {
	case strings.HasSuffix(s, "%"):
		p, ok := num(strings.TrimSuffix(s, "%"))
		if !ok || p == 0 || p > 1<<20 {
			return bad("not a positive percentage")
		}
		n = max(1, int64(cpus)*p/100)
	case strings.HasPrefix(s, "+"), strings.HasPrefix(s, "-"):
		d, ok := num(s[1:])
		if !ok || d > 1<<20 {
			return bad("not a number of CPUs")
		}
		if s[0] == '+' {
			n = int64(cpus) + d
		} else {
			n = max(1, int64(cpus)-d)
		}
	default:
		v, ok := num(s)
		switch {
		case !ok:
			return bad("not a number")
		case v == 0:
			return bad("a semaphore needs at least 1 slot (GNU sem's 0, no limit, has no meaning here)")
		}
		n = v
	}
	return n, nil
}
