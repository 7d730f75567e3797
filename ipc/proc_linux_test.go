//go:build linux

package ipc

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	line := []byte("4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615\n")
	st, start, err := parseStat(line)
	if err != nil || st != 'S' || start != 987654 {
		t.Fatalf("parseStat = %q, %d, %v; want 'S', 987654, nil", st, start, err)
	}
	for _, bad := range []string{"", "12 (x", "12 (x) S 1 2", "12 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 x"} {
		if _, _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) succeeded", bad)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 5 1 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, _, err := parseStat(b)
		if err == nil && st == 0 {
			t.Fatalf("state 0 without error for %q", b)
		}
	})
}

func TestSelfAlive(t *testing.T) {
	p, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if p.PID != os.Getpid() || p.Start == 0 {
		t.Fatalf("Self() = %v", p)
	}
	if ok, err := p.Alive(); !ok || err != nil {
		t.Fatalf("own process not alive: %v, %v", ok, err)
	}
	// Same pid, another start time: a process that had our pid before us.
	if ok, err := (Proc{PID: p.PID, Start: p.Start + 1}).Alive(); ok || err != nil {
		t.Fatalf("forged start time taken for alive: %v, %v", ok, err)
	}
	if ok, err := AliveTag(p.PID, p.Tag()+1); ok || err != nil {
		t.Fatalf("forged tag taken for alive: %v, %v", ok, err)
	}
	if ok, err := (Proc{PID: 1 << 30}).Alive(); ok || err != nil {
		t.Fatalf("absent pid alive: %v, %v", ok, err)
	}
}

// TestZombieIsDead: a killed child that its parent has not reaped is a
// zombie; kill(pid, 0) still succeeds on it, Alive must not.
func TestZombieIsDead(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep(1): %v", err)
	}
	defer cmd.Wait()
	p, st, ok, err := LookupProc(cmd.Process.Pid)
	if !ok || err != nil || st == 'Z' {
		t.Fatalf("LookupProc(child) = %v %q %v %v", p, st, ok, err)
	}
	if alive, err := p.Alive(); !alive || err != nil {
		t.Fatalf("running child not alive: %v %v", alive, err)
	}
	cmd.Process.Kill()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, st, ok, _ := LookupProc(cmd.Process.Pid)
		if ok && st == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child never became a zombie (state %q)", st)
		}
		time.Sleep(time.Millisecond)
	}
	if err := syscall.Kill(cmd.Process.Pid, 0); err != nil {
		t.Fatalf("kill(zombie, 0) = %v; the test expects it to succeed", err)
	}
	if alive, err := p.Alive(); alive || err != nil {
		t.Fatalf("zombie taken for alive: %v %v", alive, err)
	}
}
