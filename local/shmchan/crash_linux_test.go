//go:build linux

package shmchan

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
)

// A test binary started with envRole set is a helper: init runs the role
// and exits before any test starts.
const (
	envRole = "BATON_SHMCHAN_TEST_ROLE"
	envDir  = "BATON_SHMCHAN_TEST_DIR"
)

func init() {
	role := os.Getenv(envRole)
	if role == "" {
		return
	}
	run := runRole
	switch {
	case strings.HasSuffix(role, "-fd"):
		run = func(role, _ string) error { return streamRole(role) }
	case role == "pingpong-msgq":
		run = func(_, dir string) error { return pongMsgq(dir) }
	}
	if err := run(role, os.Getenv(envDir)); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runRole(role, dir string) error {
	ns, err := ipc.OpenNamespace(dir)
	if err != nil {
		return err
	}
	c, err := OpenEntry(ns.Resolve(Kind, "c"), 0, 0, false)
	if err != nil {
		return err
	}
	ctx := context.Background()
	switch role {
	case "write-and-hang": // reserve a slot, say so, and never commit
		return c.SendFunc(ctx, true, func(buf []byte) (int, error) {
			fmt.Println("reserved")
			select {}
		})
	case "read-and-hang": // take a message, say so, and never finish
		_, err := c.Recv(ctx, 1, true, func([]byte) {
			fmt.Println("reading")
			select {}
		})
		return err
	case "block": // say so, and wait on the empty channel for good
		fmt.Println("blocking")
		_, err := c.Recv(ctx, 1, true, func([]byte) {})
		return err
	case "pingpong": // echo every message of "c" back on "r"
		return pong(ns, c)
	case "source":
		return source(c)
	}
	return fmt.Errorf("unknown role %q", role)
}

// start runs a helper in role and waits for its first line, want.
func start(t testing.TB, ns *ipc.Namespace, role, want string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envDir+"="+ns.Dir())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if want != "" {
		line, err := bufio.NewReader(out).ReadString('\n')
		if !strings.HasPrefix(line, want) {
			t.Fatalf("helper %s said %q (%v), want %q", role, line, err, want)
		}
	}
	return cmd
}

// eventually fails the test unless cond holds within d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}

// A sender killed between its reservation and its commit: a receiver
// blocked behind the slot wakes at the death (pidfd, no timer), skips the
// slot, and the channel works on.
func TestKilledWriter(t *testing.T) {
	ns := testNS(t)
	c := openTest(t, ns, "c", 4, 64)
	ctx := context.Background()
	cmd := start(t, ns, "write-and-hang", "reserved")
	got := make(chan string, 1)
	go func() {
		var s string
		_, err := c.Recv(ctx, 1, true, func(m []byte) { s = string(m) })
		got <- fmt.Sprint(s, err)
	}()
	time.Sleep(50 * time.Millisecond) // the receiver sleeps behind the slot
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the head past the dead writer's slot", func() bool { return c.u64(offHead).Load() == 1 })
	if _, err := c.Send(ctx, [][]byte{[]byte("after")}, true); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != "after<nil>" {
			t.Errorf("Recv = %q, want the message sent after the kill", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Recv did not return")
	}
}

// A receiver killed while reading: that message is lost, the next sender
// at its slot recovers the slot (waking at the death), and nothing else is
// lost or doubled.
func TestKilledReader(t *testing.T) {
	ns := testNS(t)
	c := openTest(t, ns, "c", 2, 64)
	ctx := context.Background()
	for _, m := range []string{"lost", "kept"} {
		if _, err := c.Send(ctx, [][]byte{[]byte(m)}, true); err != nil {
			t.Fatal(err)
		}
	}
	reader := start(t, ns, "read-and-hang", "reading")
	// The ring is full: a slot read by the helper, and "kept". A blocking
	// Send sleeps until the helper dies, then takes its slot back.
	sent := make(chan error, 1)
	go func() {
		_, err := c.Send(ctx, [][]byte{[]byte("third")}, true)
		sent <- err
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-sent:
		t.Fatalf("Send to a full ring returned %v while the reader lived", err)
	default:
	}
	if err := reader.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-sent:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Send did not recover the dead reader's slot:\n%s", c.dump())
	}
	var got []string
	for {
		_, err := c.Recv(ctx, 8, false, func(m []byte) { got = append(got, string(m)) })
		if err != nil {
			break
		}
	}
	if strings.Join(got, " ") != "kept third" {
		t.Errorf("after the kill took %q, want kept and third", got)
	}
}

// Removing the file reports to both ends: a blocked receiver and a sender.
func TestRemoved(t *testing.T) {
	ns := testNS(t)
	c := openTest(t, ns, "c", 1, 8)
	ctx := context.Background()
	res := make(chan error, 1)
	go func() {
		_, err := c.Recv(ctx, 1, true, func([]byte) {})
		res <- err
	}()
	if err := ipc.RemoveRegion(ns, Kind, "c"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-res:
		if !errors.Is(err, baton.ErrLost) {
			t.Errorf("blocked Recv after removal: %v, want ErrLost", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a blocked Recv did not hear of the removal")
	}
	if _, err := c.Send(ctx, [][]byte{nil}, true); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Send after removal: %v, want ErrLost", err)
	}
}

// Handles leave no mapping, file descriptor or table entry behind, and
// open only the one file.
func TestNoLeaks(t *testing.T) {
	ns := testNS(t)
	maps := func() int {
		b, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), ns.Dir())
	}
	fds := func() int {
		es, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	m0, f0 := maps(), fds()
	ctx := context.Background()
	for i := range 200 {
		c, err := OpenEntry(ns.Resolve(Kind, "c"), 4, 16, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Send(ctx, [][]byte{[]byte("x")}, false); err != nil && !errors.Is(err, baton.ErrChannelFull) {
			t.Fatal(i, err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := OpenEntry(ns.Resolve(Kind, "c"), 8, 16, false); !errors.Is(err, baton.ErrMismatch) {
		t.Errorf("open with another capacity: %v", err)
	}
	eventually(t, 5*time.Second, "mappings and fds back", func() bool { return maps() == m0 && fds() <= f0 })
	c := openTest(t, ns, "c", 0, 0)
	for i := uint64(1); i < tableSize; i++ {
		if e := c.entry(i).Load(); e != 0 && i != c.me {
			t.Errorf("table entry %d still taken: %#x", i, e)
		}
	}
	names, err := ns.Names(Kind)
	if err != nil || len(names) != 1 {
		t.Errorf("files of the kind: %q (%v), want one", names, err)
	}
}

// Inspect reports the parameters, the messages held, the closed flag and
// the slots of dead processes; Remove removes the file.
func TestInspect(t *testing.T) {
	ns := testNS(t)
	c := openTest(t, ns, "c", 4, 16)
	ctx := context.Background()
	if _, err := c.Send(ctx, [][]byte{[]byte("a"), []byte("b")}, true); err != nil {
		t.Fatal(err)
	}
	start(t, ns, "read-and-hang", "reading").Process.Kill()
	if err := c.CloseSend(ctx); err != nil {
		t.Fatal(err)
	}
	var in baton.Info
	eventually(t, 5*time.Second, "the reader seen dead", func() bool {
		var err error
		in, err = Inspect(ns, "c")
		return err == nil && strings.Contains(in.Detail, "1 dead")
	})
	if in.Kind != baton.KindChannel || in.Capacity != 4 || !strings.HasPrefix(in.Detail, "2 of 4 messages, up to 16 bytes each, closed") {
		t.Errorf("Inspect = %+v", in)
	}
	infos, err := List(ns)
	if err != nil || len(infos) != 1 || infos[0].Name != "c" {
		t.Errorf("List = %+v, %v", infos, err)
	}
	if err := Remove(ns, "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := Inspect(ns, "c"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Inspect after Remove: %v", err)
	}
	if err := Remove(ns, "c"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove twice: %v", err)
	}
}
