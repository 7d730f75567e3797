//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// pinning places the redis-server processes on one CPU and, while a Redis
// table runs, this process on the others, so that a server and its clients
// never take turns on one CPU. It is off unless asked for (-pin): on a
// small virtual machine every request then wakes the other CPU, which can
// cost more than the turns it saves. It needs taskset (util-linux) and 2
// CPUs; without them nothing is pinned and the report says why.
type pinning struct {
	taskset string // path of taskset; "" when off
	server  string // CPU list of the servers, as taskset -c takes it
	client  string // CPU list of this process during Redis tables
	all     string // CPU list this process had at start
	nclient int
	why     string // why pinning is off
}

func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// newPinning decides the CPUs; want false turns pinning off.
func newPinning(want bool) pinning {
	if !want {
		return pinning{why: "off (-pin not given)"}
	}
	path, err := exec.LookPath("taskset")
	if err != nil {
		return pinning{why: "off: taskset not found (util-linux)"}
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return pinning{why: "off: " + err.Error()}
	}
	var cpus []int
	for c := range 1024 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		return pinning{why: fmt.Sprintf("off: %d CPU allowed", len(cpus))}
	}
	return pinning{taskset: path, server: cpuList(cpus[len(cpus)-1:]), client: cpuList(cpus[:len(cpus)-1]),
		all: cpuList(cpus), nclient: len(cpus) - 1}
}

func (p pinning) on() bool { return p.taskset != "" }

// String describes the pinning for the report.
func (p pinning) String() string {
	if !p.on() {
		return p.why
	}
	return fmt.Sprintf("redis-server on CPU %s; during Redis tables the clients on CPU %s (GOMAXPROCS %d)", p.server, p.client, p.nclient)
}

// command returns the command that runs path with args on the servers' CPU.
func (p pinning) command(path string, args ...string) *exec.Cmd {
	if !p.on() {
		return exec.Command(path, args...)
	}
	return exec.Command(p.taskset, append([]string{"-c", p.server, path}, args...)...)
}

// setSelf moves every thread of this process to cpus. Threads started
// later inherit the mask of the thread that starts them; the second pass
// catches one started during the first.
func (p pinning) setSelf(cpus string) error {
	pid := strconv.Itoa(os.Getpid())
	for range 2 {
		if out, err := exec.Command(p.taskset, "-a", "-p", "-c", cpus, pid).CombinedOutput(); err != nil {
			return fmt.Errorf("taskset: %v: %s", err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// pinClients moves this process off the servers' CPU and returns the
// function that undoes it. GOMAXPROCS is set to match, as the runtime
// would otherwise change it on its own in the middle of a table.
func (p pinning) pinClients() (func(), error) {
	if !p.on() {
		return func() {}, nil
	}
	if err := p.setSelf(p.client); err != nil {
		return func() {}, err
	}
	runtime.GOMAXPROCS(p.nclient)
	return func() {
		_ = p.setSelf(p.all)
		runtime.SetDefaultGOMAXPROCS()
	}, nil
}
