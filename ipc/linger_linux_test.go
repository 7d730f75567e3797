//go:build linux

package ipc

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"golang.org/x/sys/unix"
)

// testLayout is idle unless its byte 8 is set.
var testLayout = Layout{Kind: "ltest", Size: 64, Magic: 0x6c746573, Idle: func(b []byte) bool { return b[8] == 0 }}

func lingerNS(t *testing.T, d time.Duration) *Namespace {
	t.Helper()
	ns, err := OpenNamespace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.SetLinger(d); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ReclaimIdle(ns) })
	return ns
}

func openTest(t *testing.T, ns *Namespace, name string) *Region {
	t.Helper()
	e, err := ns.Entry(testLayout.Kind, name)
	if err != nil {
		t.Fatal(err)
	}
	r, err := OpenShared(e, &testLayout)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// waitFor polls cond for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	for t0 := time.Now(); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Since(t0) > d {
			return false
		}
	}
	return true
}

// TestLingerTakenUp: a file released by its last handle stays open and
// mapped for the linger, a handle opened meanwhile takes that mapping up
// again, and the file is reclaimed once a linger ends with no handle.
func TestLingerTakenUp(t *testing.T) {
	ns := lingerNS(t, 300*time.Millisecond)
	a := openTest(t, ns, "n")
	path, base := a.Path(), a.Base()
	a.Close()
	if !exists(path) {
		t.Fatal("reclaimed at the last close despite the linger")
	}
	b := openTest(t, ns, "n")
	if b.Base() != base {
		t.Fatal("a handle opened during the linger mapped the file anew")
	}
	b.Close()
	released := time.Now()
	if !waitFor(5*time.Second, func() bool { return !exists(path) }) {
		t.Fatal("not reclaimed after the linger")
	}
	if el := time.Since(released); el < 250*time.Millisecond {
		t.Fatalf("reclaimed %v after the last close, before the linger ended", el)
	}
	c := openTest(t, ns, "n")
	defer c.Close()
	if !exists(path) {
		t.Fatal("no file after a new open")
	}
}

// TestLingerKeepsBusyFile: a lingering file that is not idle stays when
// the linger ends.
func TestLingerKeepsBusyFile(t *testing.T) {
	ns := lingerNS(t, 10*time.Millisecond)
	a := openTest(t, ns, "busy")
	a.Bytes()[8] = 1
	path := a.Path()
	a.Close()
	ReclaimIdle(ns)
	if !exists(path) {
		t.Fatal("a file that was not idle was reclaimed")
	}
}

// TestLingerRemoved: a lingering file removed by someone else is not
// taken up by later opens of the name, which get the new file.
func TestLingerRemoved(t *testing.T) {
	ns := lingerNS(t, time.Minute)
	a := openTest(t, ns, "gone")
	path := a.Path()
	_, ino := a.DevIno()
	a.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	var b *Region
	defer func() { b.Close() }()
	if !waitFor(5*time.Second, func() bool {
		if b != nil {
			b.Close()
		}
		b = openTest(t, ns, "gone")
		_, i := b.DevIno()
		return i != ino
	}) {
		t.Fatal("opens still take up the removed file")
	}
	if !exists(path) {
		t.Fatal("the new open made no file")
	}
}

// TestReclaimIdleAtOnce: ReclaimIdle ends every linger of its namespace
// and no other.
func TestReclaimIdleAtOnce(t *testing.T) {
	ns, other := lingerNS(t, time.Minute), lingerNS(t, time.Minute)
	a, b := openTest(t, ns, "x"), openTest(t, other, "x")
	pa, pb := a.Path(), b.Path()
	a.Close()
	b.Close()
	ReclaimIdle(ns)
	if exists(pa) {
		t.Fatal("ReclaimIdle left a lingering file")
	}
	if !exists(pb) {
		t.Fatal("ReclaimIdle reclaimed the file of another namespace")
	}
}

// TestLingerBounded: past lingerMax lingering files, the oldest go without
// waiting out their linger.
func TestLingerBounded(t *testing.T) {
	ns := lingerNS(t, time.Minute)
	const n = lingerMax + 100
	paths := make([]string, n)
	for i := range n {
		r := openTest(t, ns, "b"+strconv.Itoa(i))
		paths[i] = r.Path()
		r.Close()
	}
	count := func() (k int) {
		for _, p := range paths {
			if exists(p) {
				k++
			}
		}
		return k
	}
	if !waitFor(5*time.Second, func() bool { return count() <= lingerMax }) {
		t.Fatalf("%d files linger, bound %d", count(), lingerMax)
	}
	if c := count(); c > n-lingerMax/2 {
		t.Fatalf("%d files linger: past the bound, they did not go down to half of it", c)
	}
	if exists(paths[0]) || !exists(paths[n-1]) {
		t.Fatal("the bound did not take the oldest first")
	}
}

func TestSetLingerRefuses(t *testing.T) {
	ns := lingerNS(t, time.Second)
	for _, d := range []time.Duration{-1, time.Minute + 1} {
		if err := ns.SetLinger(d); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Fatalf("SetLinger(%v) = %v", d, err)
		}
	}
	if got := ns.lingerFor(); got != time.Second {
		t.Fatalf("a refused SetLinger changed the linger to %v", got)
	}
}

// TestLingerShorterAfterLonger: a file of a namespace with a short linger,
// released while one of a long linger waits, goes at its own linger's end.
func TestLingerShorterAfterLonger(t *testing.T) {
	long, short := lingerNS(t, time.Minute), lingerNS(t, 50*time.Millisecond)
	a := openTest(t, long, "l")
	a.Close()
	b := openTest(t, short, "s")
	path := b.Path()
	b.Close()
	if !waitFor(5*time.Second, func() bool { return !exists(path) }) {
		t.Fatal("the shorter linger waited for the longer one")
	}
}

// TestLingerTakenUpThenRemoved: a file taken up again during its linger,
// then removed and released before the sweeper saw it taken up, is closed
// once, by the sweeper: its descriptor number must not be closed twice
// (it may name another file by then).
func TestLingerTakenUpThenRemoved(t *testing.T) {
	ns := lingerNS(t, time.Minute)
	a := openTest(t, ns, "tr")
	a.Close()
	b := openTest(t, ns, "tr")
	fd := int(b.sh.fd)
	if err := RemoveRegion(ns, testLayout.Kind, "tr"); err != nil {
		t.Fatal(err)
	}
	b.Close()
	// A descriptor opened now may take the number.
	other, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ReclaimIdle(ns)
	if _, err := unix.FcntlInt(other.Fd(), unix.F_GETFD, 0); err != nil {
		t.Fatalf("another file's descriptor was closed: %v", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && int(other.Fd()) != fd {
		t.Fatalf("the lingering file's descriptor %d is still open", fd)
	}
}
