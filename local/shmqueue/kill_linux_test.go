//go:build linux

package shmqueue

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
)

// putterEnv names the namespace directory of a helper process that puts
// single jobs until it is killed (see TestMain).
const putterEnv = "SHMQUEUE_TEST_PUTTER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(putterEnv); dir != "" {
		if err := putter(dir); err != nil {
			fmt.Fprintln(os.Stderr, "putter:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// jobBody is the payload of job n: 64 bytes that only job n has.
func jobBody(n int) []byte {
	return []byte(fmt.Sprintf("%08d", n) + string(bytes.Repeat([]byte{byte('a' + n%26)}, 56)))
}

// putter puts jobs 0, 1, 2, ... one at a time, and says "ready" after the
// first.
func putter(dir string) error {
	ns, err := ipc.OpenNamespace(dir)
	if err != nil {
		return err
	}
	q, err := OpenEntry(ns.Resolve(Kind, "k"))
	if err != nil {
		return err
	}
	for n := 0; ; n++ {
		if _, err := q.Put(context.Background(), []driver.PutJob{{Payload: jobBody(n), MaxAttempts: 1}}); err != nil {
			if errors.Is(err, baton.ErrFull) {
				time.Sleep(time.Millisecond)
				n--
				continue
			}
			return err
		}
		if n == 0 {
			fmt.Println("ready")
		}
	}
}

// Producers of single jobs (a Put without a batch's stamp) SIGKILLed at
// random instants, with the lock or without: every job left is whole and
// put once, and no slot is lost (a full queue's worth fits after the
// drain).
func TestKilledSinglePutsLeaveNothingHalf(t *testing.T) {
	dir := t.TempDir()
	ns, err := ipc.OpenNamespace(dir)
	if err != nil {
		t.Fatal(err)
	}
	q, err := OpenEntry(ns.Resolve(Kind, "k"))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for round := range 8 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), putterEnv+"="+dir)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
			cmd.Process.Kill()
			t.Fatalf("putter: %q, %v", line, err)
		}
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		seen := map[int]bool{}
		for {
			cs, err := q.Claim(ctx, 1, false)
			if errors.Is(err, baton.ErrEmpty) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			p := cs[0].Payload
			var n int
			if _, err := fmt.Sscanf(string(p[:min(8, len(p))]), "%08d", &n); err != nil || !bytes.Equal(p, jobBody(n)) {
				t.Fatalf("round %d: a job with a torn payload %q", round, p)
			}
			if seen[n] {
				t.Fatalf("round %d: job %d twice", round, n)
			}
			seen[n] = true
			if err := q.Ack(ctx, cs[0]); err != nil {
				t.Fatal(err)
			}
		}
		for n := range len(seen) {
			if !seen[n] {
				t.Fatalf("round %d: %d jobs, but not job %d: a later Put came out before it", round, len(seen), n)
			}
		}
		s, err := q.Stats(ctx)
		if err != nil || s != (driver.QueueStats{}) {
			t.Fatalf("round %d: Stats after the drain = %+v, %v; want none", round, s, err)
		}
	}
	batch := make([]driver.PutJob, Capacity)
	for i := range batch {
		batch[i] = driver.PutJob{Payload: []byte("j"), MaxAttempts: 1}
	}
	if _, err := q.Put(ctx, batch); err != nil {
		t.Fatalf("a full queue's worth after the killed producers: %v", err)
	}
}
