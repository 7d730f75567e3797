package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"syscall"

	"github.com/spf13/cobra"
)

// GNU sem's --id, --fg and --bg for baton sem.

type semGNUFlags struct {
	id     string
	fg, bg bool
}

const envBgFD = "BATON_SEM_BG_FD" // the descriptor a --bg child says "started" on

func addSemGNUFlags(cmd *cobra.Command, f *runFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.gnu.id, "id", "", "the semaphore's `NAME`, as GNU sem --id (then no NAME before CMD)")
	fl.BoolVar(&f.gnu.fg, "fg", false, "run CMD in the foreground and exit with its status (the default)")
	fl.BoolVar(&f.gnu.bg, "bg", false, "return once CMD has its slot and started; baton holds the slot in the background until CMD ends, as GNU sem does by default")
	cmd.Long += `
GNU sem's forms: --id NAME names the semaphore (no NAME before CMD then);
--fg is the default; --bg returns as soon as CMD holds its slot and has
started, leaving a baton in the background that holds the slot until CMD
ends (its output still goes to the terminal); "baton sem -j N --wait NAME"
then waits for all of them.
`
}

// semGNU applies --id and --bg to a sem invocation: it returns the args
// with NAME in place, or done with the result of a --bg start.
func semGNU(cmd *cobra.Command, f *runFlags, args []string) (_ []string, done bool, err error) {
	g := f.gnu
	if g.fg && g.bg {
		return nil, true, usageErrorf("--fg and --bg exclude each other")
	}
	if g.id != "" {
		args = append([]string{g.id}, args...)
	}
	if !g.bg {
		return args, false, nil
	}
	if f.waitAll {
		return nil, true, usageErrorf("--bg runs a command; --wait runs none")
	}
	// Check everything before starting anything in the background.
	if _, err := parseRequest(cmd, f, args, true); err != nil {
		return nil, true, err
	}
	return nil, true, startBackground()
}

// startBackground runs this baton again without --bg, in a session of its
// own with standard input from /dev/null, and returns once it says its
// command started, or with its exit status when it ends first (busy with
// -n, a refused -j).
func startBackground() error {
	self, err := os.Executable()
	if err != nil {
		return exitWith(exitBackend, err)
	}
	args := slices.DeleteFunc(slices.Clone(os.Args[1:]), func(a string) bool { return a == "--bg" })
	pr, pw, err := os.Pipe()
	if err != nil {
		return exitWith(exitBackend, err)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return exitWith(exitBackend, err)
	}
	defer null.Close()
	c := exec.Command(self, args...)
	c.Env = append(os.Environ(), envBgFD+"=3")
	c.Stdin, c.Stdout, c.Stderr = null, os.Stdout, os.Stderr
	c.ExtraFiles = []*os.File{pw}
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		pr.Close()
		pw.Close()
		return exitWith(exitNoExec, err)
	}
	pw.Close()
	b, _ := io.ReadAll(io.LimitReader(pr, 16))
	pr.Close()
	if string(b) == "started\n" {
		_ = c.Process.Release()
		return nil
	}
	err = c.Wait()
	var xe *exec.ExitError
	if errors.As(err, &xe) {
		return exitWith(xe.ExitCode(), nil)
	}
	if err != nil {
		return exitWith(exitBackend, err)
	}
	return exitWith(exitBackend, fmt.Errorf("the background baton ended before its command started"))
}

// sayStarted tells the baton that started this one with --bg that the
// command holds its slot and started.
func sayStarted() {
	if os.Getenv(envBgFD) != "3" {
		return
	}
	os.Unsetenv(envBgFD)
	f := os.NewFile(3, "started")
	_, _ = f.WriteString("started\n")
	_ = f.Close()
}
