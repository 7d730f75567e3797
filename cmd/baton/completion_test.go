package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBashCompletionPlainBash sources the bash script in a bash started
// with --norc (so without the bash-completion package) in a terminal, and
// completes a subcommand, a flag's value and a name of the backend by Tab.
func TestBashCompletionPlainBash(t *testing.T) {
	tmux := needTool(t, "tmux")
	ns := namespace(t)
	// The name exists while it is held (an idle one is reclaimed).
	holder := command(ns, "run", "jobs/nightly", "sleep", "60")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	stopCmd(t, holder)
	for deadline := time.Now().Add(20 * time.Second); run(t, ns, "status", "jobs/nightly").code != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("run jobs/nightly never held it")
		}
	}
	r := run(t, ns, "completion", "bash")
	if r.code != 0 {
		t.Fatalf("completion bash: exit %d, %s", r.code, r.stderr)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "baton.bash")
	if err := os.WriteFile(script, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := fmt.Sprintf("baton-comp-%d", os.Getpid())
	tm := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(tmux, append([]string{"-L", sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	t.Cleanup(func() { _ = exec.Command(tmux, "-L", sock, "kill-server").Run() })
	shell := fmt.Sprintf("env -i PATH=%s:/usr/bin:/bin TERM=xterm HOME=%s BATON_BACKEND=%s PS1='$ ' bash --norc --noprofile",
		filepath.Dir(batonBin), dir, ns)
	tm("new-session", "-d", "-s", "comp", "-x", "150", "-y", "20", shell)
	tm("send-keys", "-t", "comp", "source "+script+" && complete -p baton", "Enter")
	// screen waits for a line that reads want (capture-pane drops the
	// trailing blanks, so a completed word's space is not seen).
	screen := func(want, what string) string {
		t.Helper()
		var last string
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			last = tm("capture-pane", "-p", "-t", "comp")
			for _, l := range strings.Split(last, "\n") {
				if strings.TrimRight(l, " ") == want {
					return last
				}
			}
		}
		t.Fatalf("the terminal never showed %s (%q):\n%s", what, want, last)
		return ""
	}
	screen("complete -o default -F __start_baton baton", "the completion registered")
	tm("send-keys", "-t", "comp", "baton ru", "Tab")
	screen("$ baton run", "the subcommand completed")
	tm("send-keys", "-t", "comp", "-l", "--", "--on-lost k")
	tm("send-keys", "-t", "comp", "Tab")
	screen("$ baton run --on-lost kill", "the flag value completed")
	tm("send-keys", "-t", "comp", "C-u", "baton status jobs/ni", "Tab")
	got := screen("$ baton status jobs/nightly", "the name completed from the backend")
	if strings.Contains(got, "command not found") {
		t.Errorf("completion calls what a plain bash lacks:\n%s", got)
	}
}
