package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestChanSendRecv(t *testing.T) {
	be := namespace(t)
	c := command(be, "chan", "send", "--close", "jobs")
	c.Stdin = strings.NewReader("a\nb b\n\nlast")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("send from stdin: %v\n%s", err, out)
	}
	r := run(t, be, "chan", "recv", "-n", "2", "jobs")
	if r.code != 0 || r.stdout != "a\nb b\n" {
		t.Errorf("recv -n 2: exit %d, %q, %s", r.code, r.stdout, r.stderr)
	}
	r = run(t, be, "chan", "recv", "-n", "0", "jobs")
	if r.code != 0 || r.stdout != "\nlast\n" {
		t.Errorf("recv -n 0 of the rest of a closed channel: exit %d, %q, %s", r.code, r.stdout, r.stderr)
	}
	if r := run(t, be, "chan", "send", "jobs", "late"); r.code != 1 || !strings.Contains(r.stderr, "closed") {
		t.Errorf("send to a closed channel: exit %d, %s", r.code, r.stderr)
	}
}

func TestChanRaw(t *testing.T) {
	be := namespace(t)
	var in bytes.Buffer
	for _, m := range []string{"one\nline", "", "three"} {
		_ = binary.Write(&in, binary.BigEndian, uint32(len(m)))
		in.WriteString(m)
	}
	c := command(be, "chan", "send", "--raw", "--capacity", "8", "--max-message", "64", "q")
	c.Stdin = bytes.NewReader(in.Bytes())
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("send --raw: %v\n%s", err, out)
	}
	r := run(t, be, "chan", "recv", "--raw", "-n", "3", "q")
	if r.code != 0 || r.stdout != in.String() {
		t.Errorf("recv --raw: exit %d, %q, want %q; %s", r.code, r.stdout, in.String(), r.stderr)
	}
	if r := run(t, be, "chan", "recv", "-w", "50ms", "q"); r.code != 1 {
		t.Errorf("recv -w of an empty channel: exit %d, %s", r.code, r.stderr)
	}
	if r := run(t, be, "chan", "send", "q", strings.Repeat("x", 65)); r.code != 64 || !strings.Contains(r.stderr, "65 bytes") {
		t.Errorf("send of a message too large: exit %d, %s", r.code, r.stderr)
	}
	if r := run(t, be, "chan", "send", "--capacity", "4", "q", "x"); r.code != 64 || !strings.Contains(r.stderr, "capacity 8") {
		t.Errorf("send with another capacity: exit %d, %s", r.code, r.stderr)
	}
	if r := run(t, be, "chan", "recv", "a//b"); r.code != 64 {
		t.Errorf("recv of a bad name: exit %d, %s", r.code, r.stderr)
	}
}

// ls shows a channel, and rm --kind channel removes it: a receiver waiting
// on it hears of the removal.
func TestChanRm(t *testing.T) {
	be := namespace(t)
	if r := run(t, be, "chan", "send", "--capacity", "4", "q", "x"); r.code != 0 {
		t.Fatalf("send: exit %d, %s", r.code, r.stderr)
	}
	if r := run(t, be, "ls"); r.code != 0 || !strings.Contains(r.stdout, "q") || !strings.Contains(r.stdout, "channel") {
		t.Errorf("ls: exit %d, %q, %s", r.code, r.stdout, r.stderr)
	}
	if r := run(t, be, "chan", "recv", "q"); r.code != 0 || r.stdout != "x\n" {
		t.Fatalf("recv: exit %d, %q, %s", r.code, r.stdout, r.stderr)
	}
	recv := command(be, "chan", "recv", "q")
	var errb bytes.Buffer
	recv.Stderr = &errb
	if err := recv.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if r := run(t, be, "rm", "--kind", "channel", "q"); r.code != 0 {
		t.Errorf("rm --kind channel: exit %d, %s", r.code, r.stderr)
	}
	done := make(chan error, 1)
	go func() { done <- recv.Wait() }()
	select {
	case <-done:
		if recv.ProcessState.ExitCode() != 70 || !strings.Contains(errb.String(), "removed") {
			t.Errorf("a waiting recv at rm: exit %d, %s", recv.ProcessState.ExitCode(), errb.String())
		}
	case <-time.After(10 * time.Second):
		_ = recv.Process.Kill()
		t.Fatal("a waiting recv did not hear of rm")
	}
}

// A one-to-one channel: while a receiving process holds its receiving end,
// ls names it, another's recv exits 1 and says so, and sends go on.
func TestChanOneToOne(t *testing.T) {
	be := namespace(t)
	if r := run(t, be, "chan", "recv", "--one-to-one", "--max-message", "64", "-w", "10ms", "q"); r.code != 1 {
		t.Fatalf("recv that creates the channel: exit %d, %s", r.code, r.stderr)
	}
	recv := command(be, "chan", "recv", "q")
	var out, errb bytes.Buffer
	recv.Stdout, recv.Stderr = &out, &errb
	if err := recv.Start(); err != nil {
		t.Fatal(err)
	}
	defer recv.Process.Kill()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r := run(t, be, "ls")
		if strings.Contains(r.stdout, fmt.Sprintf("pid %d, receiving end", recv.Process.Pid)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ls does not show the receiver at the receiving end: %q, %s", r.stdout, r.stderr)
		}
	}
	if r := run(t, be, "chan", "recv", "-w", "1s", "q"); r.code != 1 || !strings.Contains(r.stderr, "held by") {
		t.Errorf("a second receiver: exit %d, %s", r.code, r.stderr)
	}
	if r := run(t, be, "chan", "send", "q", "x"); r.code != 0 {
		t.Fatalf("send: exit %d, %s", r.code, r.stderr)
	}
	if err := recv.Wait(); err != nil || out.String() != "x\n" {
		t.Errorf("the first receiver: %v, %q, %s", err, out.String(), errb.String())
	}
	if r := run(t, be, "chan", "send", "--one-to-one", "--capacity", "4", "q", "x"); r.code != 64 {
		t.Errorf("send with another capacity: exit %d, %s", r.code, r.stderr)
	}
}
