package chantest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// The tests of one-to-one channels (baton.ChannelOptions.OneToOne) beyond
// those that run on both kinds.

// testOneMismatch: a one-to-one opener of a many-to-many channel is
// refused; an opener that does not ask takes the kind that exists.
func testOneMismatch(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	open(t, b, ctx, name, baton.ChannelOptions{Capacity: 4, MaxMessage: 64})
	_, err := b.Channel(ctx, name, baton.ChannelOptions{OneToOne: true})
	is(t, "one-to-one Channel of a many-to-many one", err, baton.ErrMismatch)
	if err == nil || !strings.Contains(err.Error(), "one-to-one") {
		t.Errorf("the error does not name the kind: %v", err)
	}
	_, _, name2 := e.start(t)
	c := e.open(t, b, ctx, name2, baton.ChannelOptions{Capacity: 4, MaxMessage: 64})
	c2 := open(t, b, ctx, name2, baton.ChannelOptions{})
	if got, want := c2.Options(), c.Options(); got != want || !got.OneToOne {
		t.Errorf("Options() of an opener that did not ask = %+v, want %+v", got, want)
	}
	_, err = b.Channel(ctx, name2, baton.ChannelOptions{Capacity: 8, OneToOne: true})
	is(t, "one-to-one Channel with another capacity", err, baton.ErrMismatch)
}

// testOneEnds: a second sending (receiving) handle is refused while the
// first is open, sending (receiving) nothing; many goroutines share one
// end; the ends pass on at Close.
func testOneEnds(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	const capacity = 8
	s1 := e.open(t, b, ctx, name, baton.ChannelOptions{Capacity: capacity, MaxMessage: 64})
	s2 := e.open(t, b, ctx, name, baton.ChannelOptions{})
	r1 := e.open(t, b, ctx, name, baton.ChannelOptions{})
	r2 := e.open(t, b, ctx, name, baton.ChannelOptions{})
	ok(t, "Send", s1.Send(ctx, []byte("a")))
	err := s2.Send(ctx, []byte("b"))
	is(t, "Send of a second sending handle", err, baton.ErrChannelBusy)
	if err == nil || !strings.Contains(err.Error(), "sending end") || !strings.Contains(err.Error(), fmt.Sprint(os.Getpid())) {
		t.Errorf("the error does not say which end and whose: %v", err)
	}
	is(t, "TrySend of a second sending handle", s2.TrySend(ctx, []byte("b")), baton.ErrChannelBusy)
	is(t, "SendFunc of a second sending handle", s2.SendFunc(ctx, func(buf []byte) (int, error) { return copy(buf, "b"), nil }), baton.ErrChannelBusy)
	m, err := r1.Recv(ctx)
	ok(t, "Recv", err)
	if string(m) != "a" {
		t.Errorf("Recv = %q, want a", m)
	}
	_, err = r2.TryRecv(ctx)
	is(t, "TryRecv of a second receiving handle", err, baton.ErrChannelBusy)
	ok(t, "Send", s1.Send(ctx, []byte("c")))
	_, err = r2.RecvFunc(ctx, 4, func([]byte) { t.Error("a refused receiver was handed a message") })
	is(t, "RecvFunc of a second receiving handle", err, baton.ErrChannelBusy)
	m, err = r1.TryRecv(ctx)
	ok(t, "TryRecv", err)
	if string(m) != "c" {
		t.Errorf("TryRecv = %q after refused calls, want c (they sent and took nothing)", m)
	}
	_, err = r1.TryRecv(ctx)
	is(t, "TryRecv after refused sends", err, baton.ErrChannelEmpty)

	// Goroutines on each end, through a ring smaller than what they send:
	// every message once, in order per goroutine.
	const senders, per = 4, 500
	var wg sync.WaitGroup
	errs := make(chan error, senders+2)
	for g := range senders {
		wg.Go(func() {
			var buf []byte
			for seq := range per {
				buf = encode(buf[:0], g, uint64(seq))
				if g%2 == 1 {
					if _, err := s1.SendBatch(ctx, [][]byte{buf}); err != nil {
						errs <- err
						return
					}
					continue
				}
				if err := s1.Send(ctx, buf); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var mu sync.Mutex
	chk := newChecker()
	taken := 0
	rctx, stop := context.WithTimeout(ctx, 20*time.Second)
	defer stop()
	var rg sync.WaitGroup
	for r := range 2 {
		rg.Go(func() {
			for rctx.Err() == nil {
				// Takes of one end are one at a time, so the checker
				// sees them in the order they were made.
				_, err := r1.RecvFunc(rctx, 1+5*r, func(m []byte) {
					id, seq, err := decode(m)
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					defer mu.Unlock()
					chk.add(rec{0, id, seq})
					if taken++; taken == senders*per {
						stop()
					}
				})
				if err != nil && rctx.Err() == nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	rg.Wait()
	if taken != senders*per {
		t.Errorf("took %d messages of %d", taken, senders*per)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	chk.report(t)
	chk.allTaken(t, senders, per)

	// The ends pass on at Close.
	ok(t, "Close of the sending handle", s1.Close())
	ok(t, "Send of the next sending handle", s2.Send(ctx, []byte("d")))
	ok(t, "Close of the receiving handle", r1.Close())
	m, err = r2.Recv(ctx)
	ok(t, "Recv of the next receiving handle", err)
	if string(m) != "d" {
		t.Errorf("Recv = %q, want d", m)
	}
}

// testOneEndsOfTheDead: an end whose holder's process was killed passes on
// at once to the next handle that wants it.
func testOneEndsOfTheDead(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	const capacity = 4
	ch := e.open(t, b, ctx, name, baton.ChannelOptions{Capacity: capacity, MaxMessage: 64})
	// A sender that holds the sending end, blocked on the full ring.
	sender := spawn(t, e, "send", helperArgs{Name: name, Capacity: capacity, ID: 7, One: true})
	in, isIn := b.(baton.Inspector)
	if !isIn {
		t.Fatal("the backend is no baton.Inspector: the test cannot tell when the ring is full")
	}
	full := fmt.Sprintf("%d of %d messages", capacity, capacity)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		info, err := in.Inspect(ctx, baton.KindChannel, name)
		ok(t, "Inspect", err)
		if strings.HasPrefix(info.Detail, full) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sender did not fill the ring: %q\n%s", info.Detail, sender.stderr.String())
		}
	}
	is(t, "TrySend while a live process holds the sending end", ch.TrySend(ctx, []byte("x")), baton.ErrChannelBusy)
	sender.kill(t)
	is(t, "TrySend once it was killed, to its full ring", ch.TrySend(ctx, []byte("x")), baton.ErrChannelFull)
	for seq := range capacity {
		m, err := ch.Recv(ctx)
		ok(t, "Recv", err)
		if id, s, err := decode(m); err != nil || id != 7 || s != uint64(seq) {
			t.Errorf("Recv = sender %d message %d (%v), want sender 7 message %d", id, s, err, seq)
		}
	}
	ok(t, "Send after the killed sender", ch.Send(ctx, encode(nil, 8, 0)))

	// A receiver that holds the receiving end.
	_, _, name2 := e.start(t)
	ch2 := e.open(t, b, ctx, name2, baton.ChannelOptions{Capacity: capacity, MaxMessage: 64})
	log := filepath.Join(t.TempDir(), "log")
	recv := spawn(t, e, "recv", helperArgs{Name: name2, Capacity: capacity, Log: log, One: true})
	ok(t, "Send", ch2.Send(ctx, encode(nil, 1, 0)))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if st, err := os.Stat(log); err == nil && st.Size() >= 12 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver did not take the message\n%s", recv.stderr.String())
		}
	}
	_, err := ch2.TryRecv(ctx)
	is(t, "TryRecv while a live process holds the receiving end", err, baton.ErrChannelBusy)
	recv.kill(t)
	_, err = ch2.TryRecv(ctx)
	is(t, "TryRecv once it was killed", err, baton.ErrChannelEmpty)
	ok(t, "Send", ch2.Send(ctx, encode(nil, 1, 1)))
	m, err := ch2.Recv(ctx)
	ok(t, "Recv after the killed receiver", err)
	if id, s, err := decode(m); err != nil || id != 1 || s != 1 {
		t.Errorf("Recv = sender %d message %d (%v), want 1, 1", id, s, err)
	}
}

// testOneCrossProcess: two sender processes one after the other, and the
// test's receiver, on one channel: every message taken once, in order.
func testOneCrossProcess(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	const per = 5000
	ch := e.open(t, b, ctx, name, baton.ChannelOptions{Capacity: 32, MaxMessage: 64})
	chk := newChecker()
	done := make(chan error, 1)
	go func() {
		done <- receiveWith(ctx, ch, 16, true, func(id int, seq uint64) { chk.add(rec{0, id, seq}) })
	}()
	for s := range 2 {
		spawn(t, e, "send", helperArgs{Name: name, ID: s, Count: per, Batch: 1 + 31*s, One: true}).wait(t)
	}
	// The test's handle holds the receiving end; CloseSend needs none.
	ok(t, "CloseSend", ch.CloseSend(ctx))
	ok(t, "receiver", within(t, done, 60*time.Second, "the receiver did not see the end"))
	chk.report(t)
	chk.allTaken(t, 2, per)
}

// testOneKill SIGKILLs the sending and the receiving process of a
// one-to-one channel at random, each replaced by a new one, then lets one
// steady sender send its messages while receivers are still killed: no
// message is taken twice or out of order, and every message a sender
// published is taken but for at most a batch per killed receiver.
func testOneKill(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	total := e.killMessages()
	const capacity, minKills = 64, 16
	ch := e.open(t, b, ctx, name, baton.ChannelOptions{Capacity: capacity, MaxMessage: 64})
	dir := t.TempDir()
	var logs []string
	nextID, lossCap, kills := 100, 0, 0
	newRecv := func() *proc {
		a := helperArgs{Name: name, Capacity: capacity, Log: filepath.Join(dir, fmt.Sprint(len(logs))), Batch: 1 + 3*(len(logs)%2), One: true}
		logs = append(logs, a.Log)
		return spawn(t, e, "recv", a)
	}
	newSend := func() *proc {
		nextID++
		return spawn(t, e, "send", helperArgs{Name: name, Capacity: capacity, ID: nextID, Batch: 1 + 5*(nextID%2), One: true})
	}
	killRecv := func(p *proc) *proc {
		p.kill(t)
		kills++
		lossCap += max(p.a.Batch, 1)
		return newRecv()
	}
	pause := func() time.Duration { return time.Duration(2+rand.IntN(25)) * time.Millisecond }
	recv, send := newRecv(), newSend()
	for kills < minKills {
		time.Sleep(pause())
		if rand.IntN(2) == 0 {
			recv = killRecv(recv)
			continue
		}
		send.kill(t)
		kills++
		send = newSend()
	}
	send.kill(t)
	kills++
	steady := spawn(t, e, "send", helperArgs{Name: name, Capacity: capacity, ID: 0, Count: total, Batch: 8, One: true})
	finished := make(chan struct{})
	go func() {
		_ = steady.cmd.Wait()
		close(finished)
	}()
	for done := false; !done; {
		select {
		case <-finished:
			done = true
		case <-time.After(pause()):
			recv = killRecv(recv)
		}
	}
	if !steady.cmd.ProcessState.Success() {
		t.Fatalf("steady sender: %v\n%s", steady.cmd.ProcessState, steady.stderr.String())
	}
	ok(t, "CloseSend", ch.CloseSend(ctx))
	recv.wait(t)
	chk := newChecker()
	for i, l := range logs {
		readLog(t, chk, l, i)
	}
	chk.report(t)
	// Every killed sender's messages up to the last one taken were taken,
	// as were all the steady sender's, but for what killed receivers lost.
	lost := chk.missing(0, total)
	for id := 101; id <= nextID; id++ {
		last := -1
		for k := range chk.seen {
			if k[0] == uint64(id) {
				last = max(last, int(k[1]))
			}
		}
		lost += chk.missing(id, last+1)
	}
	t.Logf("%d steady messages, %d kills, %d lost at killed receivers (allowed %d), %d messages taken in all", total, kills, lost, lossCap, len(chk.seen))
	if lost > lossCap {
		t.Errorf("%d messages lost, more than the %d that killed receivers may lose", lost, lossCap)
	}
}

// testCloseRace: CloseSend at a random moment while a sender sends and a
// receiver takes, many times: every send that succeeded is taken before
// the receiver hears of the end, and no send succeeds after it.
func testCloseRace(t *testing.T, e *env) {
	b, ctx, _ := e.start(t)
	rounds := 200
	if testing.Short() {
		rounds = 50
	}
	for round := range rounds {
		name := fmt.Sprintf("ct-%d-close-race-%v-%d", os.Getpid(), e.one, round)
		s := e.open(t, b, ctx, name, baton.ChannelOptions{Capacity: 4, MaxMessage: 16})
		r := e.open(t, b, ctx, name, baton.ChannelOptions{})
		sent := make(chan int, 1)
		go func() {
			n := 0
			for {
				var err error
				switch n % 3 {
				case 1: // a send that is slow to write its message
					err = s.SendFunc(ctx, func(buf []byte) (int, error) {
						time.Sleep(time.Duration(rand.IntN(50)) * time.Microsecond)
						return copy(buf, "f"), nil
					})
				case 2:
					_, err = s.SendBatch(ctx, [][]byte{[]byte("a"), []byte("b")})
					if err == nil {
						n++ // a batch that starts sends its first message at least
					}
				default:
					err = s.Send(ctx, []byte("m"))
				}
				if err != nil {
					if !errors.Is(err, baton.ErrChannelClosed) {
						t.Errorf("round %d: send: %v", round, err)
					}
					sent <- n
					return
				}
				n++
			}
		}()
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
		ok(t, "CloseSend", r.CloseSend(ctx))
		got := 0
		for {
			_, err := r.Recv(ctx)
			if err != nil {
				is(t, "Recv at the end", err, io.EOF)
				break
			}
			got++
		}
		n := within(t, sent, 10*time.Second, "the sender did not hear of CloseSend")
		if got < n {
			t.Fatalf("round %d: %d messages taken, fewer than the %d sends that succeeded", round, got, n)
		}
		ok(t, "Close", s.Close())
		ok(t, "Close", r.Close())
	}
}
