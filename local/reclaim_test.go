package local_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/local"
)

// Environment of the children of TestReclaimRace.
const (
	envRaceDir  = "BATON_LOCAL_RACE_DIR"
	envRaceKind = "BATON_LOCAL_RACE_KIND"
	// envRaceLinger: the child lingers (WithLinger) 1 ms and pauses 2 ms
	// between rounds, so that its own reclaims, at the end of each linger,
	// race the other children's opens.
	envRaceLinger = "BATON_LOCAL_RACE_LINGER"
)

// raceBoard is a shared page: inside counts the processes in the critical
// section, last is the last token given; the parent sets stop.
type raceBoard struct {
	stop   atomic.Int64
	inside atomic.Int64
	last   atomic.Uint64
	bad    atomic.Int64 // exclusion or token order broken
	rounds atomic.Int64
}

func openRaceBoard(dir string) (*raceBoard, *ipc.Region, error) {
	ns, err := ipc.OpenNamespace(dir)
	if err != nil {
		return nil, nil, err
	}
	r, err := ipc.OpenRegion(ns, "board", "race", 4096)
	if err != nil {
		return nil, nil, err
	}
	return (*raceBoard)(unsafe.Pointer(&r.Bytes()[0])), r, nil
}

// raceChild runs in a re-executed test binary: it opens the name, takes
// it exclusively, checks that it is alone and that the token is above every
// earlier one, gives it back and closes, until the parent says stop. Each
// close may be the host's last, which reclaims the file while the other
// children open it.
func raceChild() int {
	dir, kind := os.Getenv(envRaceDir), os.Getenv(envRaceKind)
	board, r, err := openRaceBoard(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer r.Close()
	lingers := os.Getenv(envRaceLinger) != ""
	opts := []local.Option{local.WithLinger(0)}
	if lingers {
		opts[0] = local.WithLinger(time.Millisecond)
	}
	if kind == "flock" {
		opts = append(opts, local.WithMutex(local.MutexFlock))
	}
	b, err := local.Open(dir, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer b.Close()
	ctx := context.Background()
	for board.stop.Load() == 0 {
		if err := raceRound(ctx, b, kind, board); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if lingers {
			time.Sleep(2 * time.Millisecond)
		}
	}
	return 0
}

func raceRound(ctx context.Context, b baton.Backend, kind string, board *raceBoard) error {
	var (
		token   baton.Token
		release func() error
		closeH  func() error
	)
	switch kind {
	case "mutex", "flock":
		m, err := b.Mutex(ctx, "race")
		if err != nil {
			return err
		}
		h, err := m.Lock(ctx)
		if err != nil {
			return err
		}
		token, release, closeH = h.Token(), func() error { return m.Unlock(ctx) }, m.Close
	case "rw":
		m, err := b.RWMutex(ctx, "race")
		if err != nil {
			return err
		}
		h, err := m.Lock(ctx)
		if err != nil {
			return err
		}
		token, release, closeH = h.Token(), func() error { return m.Unlock(ctx) }, m.Close
	case "sem":
		s, err := b.Semaphore(ctx, "race", 1)
		if err != nil {
			return err
		}
		if _, err := s.Acquire(ctx, 1); err != nil {
			return err
		}
		release, closeH = func() error { return s.Release(ctx, 1) }, s.Close
	default:
		return fmt.Errorf("unknown kind %q", kind)
	}
	if board.inside.Add(1) != 1 {
		board.bad.Add(1)
	}
	if token != 0 {
		if last := board.last.Load(); uint64(token) <= last {
			board.bad.Add(1)
		}
		board.last.Store(uint64(token))
	}
	board.inside.Add(-1)
	board.rounds.Add(1)
	if err := release(); err != nil {
		return err
	}
	return closeH()
}

// TestReclaimRace: processes open, take, give back and close one name in
// a loop, so that the file is reclaimed by one while others open it; a
// reclaim that let an opener onto a file no longer named (two lock words
// for one name) shows as two processes inside at once, and tokens must
// keep increasing across reclaims.
func TestReclaimRace(t *testing.T) {
	for _, kind := range []string{"mutex", "flock", "rw", "sem"} {
		t.Run(kind, func(t *testing.T) {
			dir := namespace(t)
			board, r, err := openRaceBoard(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			const children = 3
			cmds := make([]*exec.Cmd, children)
			for i := range cmds {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), envRaceDir+"="+dir, envRaceKind+"="+kind)
				if i == 0 {
					cmd.Env = append(cmd.Env, envRaceLinger+"=1")
				}
				cmd.Stderr = os.Stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds[i] = cmd
			}
			// Count the files the name had: each new inode is a reclaim
			// followed by a creation.
			path := map[string]string{"mutex": "futex", "flock": "flock", "rw": "shmrw", "sem": "shmsem"}[kind]
			path = filepath.Join(dir, path, "race")
			inodes := map[uint64]bool{}
			// At least 1.5 s, longer (up to 10 s) on a slow machine until
			// the name has been reclaimed ten times.
			start := time.Now()
			for el := time.Duration(0); el < 1500*time.Millisecond || len(inodes) < 10 && el < 10*time.Second; el = time.Since(start) {
				time.Sleep(200 * time.Microsecond)
				var st syscall.Stat_t
				if syscall.Stat(path, &st) == nil {
					inodes[st.Ino] = true
				}
			}
			board.stop.Store(1)
			for _, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("child: %v", err)
				}
			}
			t.Logf("%d rounds, %d files of the name seen", board.rounds.Load(), len(inodes))
			if n := board.bad.Load(); n != 0 {
				t.Fatalf("%d rounds broke exclusion or token order", n)
			}
			if board.rounds.Load() < 100 || len(inodes) < 3 {
				t.Fatalf("%d rounds and %d reclaims: the race was not exercised", board.rounds.Load(), len(inodes))
			}
			if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the name's file stays once every process closed it: %v", err)
			}
		})
	}
}

// TestTokensAcrossReclaim: a name reclaimed and opened again gives tokens
// above those it gave before, on each mechanism with tokens.
func TestTokensAcrossReclaim(t *testing.T) {
	dir := namespace(t)
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	type locker interface {
		Lock(context.Context) (baton.Hold, error)
		Unlock(context.Context) error
		Close() error
	}
	fb, err := local.Open(dir, local.WithMutex(local.MutexFlock))
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	for _, k := range []struct {
		kind, dir string
		open      func() (locker, error)
	}{
		{"mutex", "futex", func() (locker, error) { return b.Mutex(ctx, "tok") }},
		{"flock", "flock", func() (locker, error) { return fb.Mutex(ctx, "tok") }},
		{"rw", "shmrw", func() (locker, error) { return b.RWMutex(ctx, "tok") }},
	} {
		var last baton.Token
		for round := range 3 {
			m, err := k.open()
			if err != nil {
				t.Fatal(err)
			}
			for range 5 {
				h, err := m.Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if h.Token() <= last {
					t.Fatalf("%s round %d: token %d after %d", k.kind, round, h.Token(), last)
				}
				last = h.Token()
				if err := m.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			waitGone(t, filepath.Join(dir, k.dir, "tok"))
		}
	}
}

// TestResidueBounded: Lock, Unlock and Close of many distinct names leave
// at most residueBound regular files in the namespace (the token floor),
// whatever the count, on every mechanism whose idle names are reclaimed:
// futex and flock Mutex, shared-memory RWMutex and Semaphore, Cond, and a
// Value never written (one written is state, and stays).
func TestResidueBounded(t *testing.T) {
	const residueBound = 1
	names := 2000
	if testing.Short() {
		names = 200
	}
	dir := namespace(t)
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fb, err := local.Open(dir, local.WithMutex(local.MutexFlock))
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	ctx := context.Background()
	for i := range names {
		n := "tenant/" + strconv.Itoa(i)
		for _, be := range []baton.Backend{b, fb} {
			m, err := be.Mutex(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			m.Unlock(ctx)
			m.Close()
		}
		rw, err := b.RWMutex(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rw.RLock(ctx); err != nil {
			t.Fatal(err)
		}
		rw.RUnlock(ctx)
		rw.Close()
		s, err := b.Semaphore(ctx, n, 2)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		s.Release(ctx, 1)
		s.Close()
		c, err := b.Cond(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		v, err := b.Value(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := v.Load(ctx); err != nil {
			t.Fatal(err)
		}
		v.Close()
	}
	// The names linger (WithLinger's default) and then go.
	deadline := time.Now().Add(ipc.DefaultLinger + 5*time.Second)
	for files := regularFiles(t, dir); files > residueBound; files = regularFiles(t, dir) {
		if time.Now().After(deadline) {
			t.Fatalf("%d distinct names on each mechanism left %d files, want at most %d", names, files, residueBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
	infos, err := b.(baton.Inspector).List(ctx)
	if err != nil || len(infos) != 0 {
		t.Fatalf("List after every name went idle = %d objects, %v", len(infos), err)
	}
}

func regularFiles(t *testing.T, dir string) int {
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && filepath.Base(filepath.Dir(p)) != "board" {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestValueWrittenStays: a Value is state: once written, its file stays
// after every handle closed, and the next handle reads what was written.
func TestValueWrittenStays(t *testing.T) {
	b, err := local.Open(namespace(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	v, err := b.Value(ctx, "config")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.CompareAndSwap(ctx, 0, []byte("on")); err != nil {
		t.Fatal(err)
	}
	v.Close()
	v, err = b.Value(ctx, "config")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if data, ver, err := v.Load(ctx); err != nil || string(data) != "on" || ver != 1 {
		t.Fatalf("Load after every handle closed = %q, %d, %v", data, ver, err)
	}
}

// waitGone waits until path is gone: a name's file lingers (WithLinger)
// after its last Close, then is reclaimed.
func waitGone(t *testing.T, path string) {
	t.Helper()
	t0 := time.Now()
	for {
		_, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return
		}
		if time.Since(t0) > ipc.DefaultLinger+5*time.Second {
			t.Fatalf("%s not reclaimed %v after the last close: %v", path, time.Since(t0), err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
