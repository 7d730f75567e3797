package chantest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// proc is a helper process.
type proc struct {
	cmd    *exec.Cmd
	out    *bufio.Reader
	stderr bytes.Buffer
	a      helperArgs
}

// spawn re-executes the test binary as a helper in role and waits for its
// first line, which it prints once it has sent or opened.
func spawn(t *testing.T, e *env, role string, a helperArgs) *proc {
	t.Helper()
	args, _ := json.Marshal(a)
	p := &proc{cmd: exec.Command(os.Args[0], "-test.run=^$"), a: a}
	p.cmd.Env = append(os.Environ(), envHelper+"="+e.s.Name+"/"+role, envCfg+"="+e.cfg, envArgs+"="+string(args))
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	ok(t, "stdout pipe", err)
	ok(t, "start helper", p.cmd.Start())
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	p.out = bufio.NewReader(out)
	line := make(chan string, 1)
	go func() {
		l, _ := p.out.ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if !strings.HasPrefix(l, "ready") {
			t.Fatalf("helper %s said %q\n%s", role, l, p.stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("helper %s silent\n%s", role, p.stderr.String())
	}
	return p
}

func (p *proc) wait(t *testing.T) {
	t.Helper()
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("helper: %v\n%s", err, p.stderr.String())
	}
}

func (p *proc) kill(t *testing.T) {
	t.Helper()
	ok(t, "kill", p.cmd.Process.Kill())
	_ = p.cmd.Wait()
}

// runHelper runs a role: "send" sends Count messages as sender ID (for
// ever when Count is 0), in batches of Batch; "recv" takes messages in
// batches of Batch until the channel is closed and drained, appending a
// record of each batch to Log with one write.
func runHelper(s Suite, cfg, role string, a helperArgs) error {
	b, err := s.Open(cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	ctx := context.Background()
	ch, err := b.Channel(ctx, a.Name, baton.ChannelOptions{Capacity: a.Capacity, MaxMessage: 64, OneToOne: a.One})
	if err != nil {
		return err
	}
	defer ch.Close()
	batch := max(a.Batch, 1)
	switch role {
	case "send":
		msgs := make([][]byte, batch)
		said := false
		for seq := 0; a.Count == 0 || seq < a.Count; {
			k := batch
			if a.Count > 0 {
				k = min(k, a.Count-seq)
			}
			for i := range k {
				msgs[i] = encode(msgs[i], a.ID, uint64(seq+i))
			}
			n, err := ch.SendBatch(ctx, msgs[:k])
			if err != nil {
				return err
			}
			seq += n
			if !said {
				fmt.Println("ready")
				said = true
			}
		}
		return nil
	case "recv":
		f, err := os.OpenFile(a.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Println("ready")
		var buf []byte
		for {
			msgs, err := ch.RecvBatch(ctx, batch)
			if err != nil {
				if isEOF(err) {
					return nil
				}
				return err
			}
			buf = buf[:0]
			for _, m := range msgs {
				id, seq, err := decode(m)
				if err != nil {
					return err
				}
				buf = binary.LittleEndian.AppendUint32(buf, uint32(id))
				buf = binary.LittleEndian.AppendUint64(buf, seq)
			}
			if _, err := f.Write(buf); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("unknown role %q", role)
}

// readLog adds the records of a receiver's log to chk as receiver r.
func readLog(t *testing.T, chk *checker, path string, r int) {
	t.Helper()
	data, err := os.ReadFile(path)
	ok(t, "read log", err)
	for len(data) >= 12 { // a killed receiver may leave a partial record
		chk.add(rec{r, int(binary.LittleEndian.Uint32(data)), binary.LittleEndian.Uint64(data[4:])})
		data = data[12:]
	}
}

// testCrossProcess: sender and receiver processes, and a receiver in the
// test: every message taken once, in order per sender.
func testCrossProcess(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	const per = 5000
	ch := open(t, b, ctx, name, baton.ChannelOptions{Capacity: 32, MaxMessage: 64})
	dir := t.TempDir()
	var recvs []*proc
	for r := range 2 {
		recvs = append(recvs, spawn(t, e, "recv", helperArgs{Name: name, Log: filepath.Join(dir, fmt.Sprint(r)), Batch: 1 + 7*r}))
	}
	chk := newChecker()
	done := make(chan error, 1)
	go func() {
		done <- receive(ctx, ch, 3, func(id int, seq uint64) { chk.add(rec{99, id, seq}) })
	}()
	var senders []*proc
	for s := range 3 {
		senders = append(senders, spawn(t, e, "send", helperArgs{Name: name, ID: s, Count: per, Batch: 1 + 31*(s%2)}))
	}
	for _, p := range senders {
		p.wait(t)
	}
	ok(t, "CloseSend", ch.CloseSend(ctx))
	for _, p := range recvs {
		p.wait(t)
	}
	ok(t, "receiver in the test", within(t, done, 60*time.Second, "the receiver in the test did not see the end"))
	for r, p := range recvs {
		readLog(t, chk, p.a.Log, r)
	}
	chk.report(t)
	chk.allTaken(t, 3, per)
}

// testKill SIGKILLs sending and receiving processes at random while two
// steady senders send their messages: the ring keeps working, no message
// is taken twice or out of order, and every steady message is taken but
// for at most a batch per killed receiver (what it was taking, or had
// taken and not yet logged).
func testKill(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	total := e.killMessages()
	const capacity, minKills = 64, 12
	ch := open(t, b, ctx, name, baton.ChannelOptions{Capacity: capacity, MaxMessage: 64})
	dir := t.TempDir()
	var (
		mu      sync.Mutex
		chk     = newChecker()
		nextID  = 100
		nextLog = 0
		lossCap = 0
		kills   = 0
	)
	recvArgs := func() helperArgs {
		nextLog++
		return helperArgs{Name: name, Capacity: capacity, Log: filepath.Join(dir, fmt.Sprint(nextLog)), Batch: 1 + 3*(nextLog%2)}
	}
	sendArgs := func() helperArgs {
		nextID++
		return helperArgs{Name: name, Capacity: capacity, ID: nextID, Batch: 1 + 5*(nextID%2)}
	}
	done := make(chan error, 1)
	go func() {
		done <- receive(ctx, ch, 2, func(id int, seq uint64) {
			mu.Lock()
			chk.add(rec{0, id, seq})
			mu.Unlock()
		})
	}()
	var logs []string
	victims := []*proc{}
	for range 2 {
		p := spawn(t, e, "recv", recvArgs())
		logs = append(logs, p.a.Log)
		victims = append(victims, p)
		victims = append(victims, spawn(t, e, "send", sendArgs()))
	}
	steady := make(chan struct{})
	var steadyProcs []*proc
	for s := range 2 {
		steadyProcs = append(steadyProcs, spawn(t, e, "send", helperArgs{Name: name, Capacity: capacity, ID: s, Count: total/2 + s*(total%2), Batch: 1 + 7*s}))
	}
	go func() {
		for _, p := range steadyProcs {
			_ = p.cmd.Wait()
		}
		close(steady)
	}()
	for finished := false; !finished || kills < minKills; {
		select {
		case <-steady:
			finished = true
		case <-time.After(time.Duration(2+rand.IntN(25)) * time.Millisecond):
		}
		i := rand.IntN(len(victims))
		v := victims[i]
		v.kill(t)
		kills++
		if v.a.Log != "" {
			lossCap += max(v.a.Batch, 1)
			victims[i] = spawn(t, e, "recv", recvArgs())
			logs = append(logs, victims[i].a.Log)
		} else {
			victims[i] = spawn(t, e, "send", sendArgs())
		}
	}
	for _, p := range steadyProcs {
		if !p.cmd.ProcessState.Success() {
			t.Errorf("steady sender: %v\n%s", p.cmd.ProcessState, p.stderr.String())
		}
	}
	for _, v := range victims {
		if v.a.Log == "" {
			v.kill(t)
			kills++
		}
	}
	ok(t, "CloseSend", ch.CloseSend(ctx))
	for _, v := range victims {
		if v.a.Log != "" {
			v.wait(t)
		}
	}
	ok(t, "receiver in the test", within(t, done, 60*time.Second, "the receiver in the test did not see the end: the ring is stuck"))
	for i, l := range logs {
		readLog(t, chk, l, i+1)
	}
	chk.report(t)
	lost := chk.missing(0, total/2) + chk.missing(1, total-total/2)
	t.Logf("%d steady messages, %d kills, %d lost at killed receivers (allowed %d), %d messages taken in all", total, kills, lost, lossCap, len(chk.seen))
	if lost > lossCap {
		t.Errorf("%d steady messages lost, more than the %d that killed receivers may lose", lost, lossCap)
	}
}
