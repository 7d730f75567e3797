package chantest

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/batonlock/baton"
)

// A message of the order tests: the sender's id, its sequence number, and a
// filler whose length and bytes depend on both, so that a torn or mixed
// message does not parse.
func encode(buf []byte, id int, seq uint64) []byte {
	n := 12 + int(seq%41)
	buf = binary.LittleEndian.AppendUint32(buf[:0], uint32(id))
	buf = binary.LittleEndian.AppendUint64(buf, seq)
	for len(buf) < n {
		buf = append(buf, byte(seq)^byte(id)^byte(len(buf)))
	}
	return buf
}

func decode(m []byte) (id int, seq uint64, err error) {
	if len(m) < 12 {
		return 0, 0, fmt.Errorf("message of %d bytes", len(m))
	}
	id, seq = int(binary.LittleEndian.Uint32(m)), binary.LittleEndian.Uint64(m[4:])
	if want := encode(nil, id, seq); string(want) != string(m) {
		return 0, 0, fmt.Errorf("torn message %x", m)
	}
	return id, seq, nil
}

// rec is one message taken: by which receiver, from which sender.
type rec struct {
	recv, id int
	seq      uint64
}

// checker checks a history of takes: no message twice, and each
// receiver's messages of one sender in increasing order.
type checker struct {
	seen map[[2]uint64]int // (id, seq) → receiver
	last map[[2]int]uint64 // (receiver, id) → seq+1 of the last taken
	errs []error
}

func newChecker() *checker {
	return &checker{seen: map[[2]uint64]int{}, last: map[[2]int]uint64{}}
}

func (c *checker) add(r rec) {
	k := [2]uint64{uint64(r.id), r.seq}
	if prev, dup := c.seen[k]; dup {
		c.errs = append(c.errs, fmt.Errorf("message %d of sender %d taken by receivers %d and %d", r.seq, r.id, prev, r.recv))
	}
	c.seen[k] = r.recv
	lk := [2]int{r.recv, r.id}
	if l := c.last[lk]; r.seq+1 <= l {
		c.errs = append(c.errs, fmt.Errorf("receiver %d took message %d of sender %d after message %d", r.recv, r.seq, r.id, l-1))
	}
	c.last[lk] = r.seq + 1
}

// missing returns how many of sender id's first n messages were not taken.
func (c *checker) missing(id, n int) int {
	m := 0
	for s := range n {
		if _, ok := c.seen[[2]uint64{uint64(id), uint64(s)}]; !ok {
			m++
		}
	}
	return m
}

// allTaken fails t for each of senders 0..senders-1 whose first per
// messages were not all taken.
func (c *checker) allTaken(t *testing.T, senders, per int) {
	t.Helper()
	for s := range senders {
		if m := c.missing(s, per); m > 0 {
			t.Errorf("%d of sender %d's %d messages were not taken", m, s, per)
		}
	}
}

func (c *checker) report(t *testing.T) {
	t.Helper()
	for i, err := range c.errs {
		if i == 10 {
			t.Errorf("... and %d more", len(c.errs)-10)
			break
		}
		t.Error(err)
	}
}

// receive takes messages from ch until the channel is closed and drained,
// passing each to got.
func receive(ctx context.Context, ch baton.Channel, batch int, got func(id int, seq uint64)) error {
	return receiveWith(ctx, ch, batch, false, got)
}

// receiveWith is receive, through RecvFunc's in-place views if inPlace.
func receiveWith(ctx context.Context, ch baton.Channel, batch int, inPlace bool, got func(id int, seq uint64)) error {
	for inPlace {
		var bad error
		_, err := ch.RecvFunc(ctx, batch, func(m []byte) {
			id, seq, err := decode(m)
			if err != nil {
				bad = err
				return
			}
			got(id, seq)
		})
		if errors.Is(err, io.EOF) {
			return bad
		}
		if err := cmp.Or(bad, err); err != nil {
			return err
		}
	}
	for {
		msgs, err := ch.RecvBatch(ctx, batch)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, m := range msgs {
			id, seq, err := decode(m)
			if err != nil {
				return err
			}
			got(id, seq)
		}
	}
}

// testMany: senders and receivers on several handles, as goroutines: every
// message taken exactly once, in order per sender.
func testMany(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	const handles, senders, receivers, per = 3, 6, 5, 3000
	var hs []baton.Channel
	for range handles {
		hs = append(hs, open(t, b, ctx, name, baton.ChannelOptions{Capacity: 16, MaxMessage: 64}))
	}
	var (
		mu   sync.Mutex
		chk  = newChecker()
		wg   sync.WaitGroup
		errc = make(chan error, senders+receivers)
	)
	for r := range receivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- receiveWith(ctx, hs[r%handles], 1+r%3*4, r%2 == 1, func(id int, seq uint64) {
				mu.Lock()
				chk.add(rec{r, id, seq})
				mu.Unlock()
			})
		}()
	}
	var sw sync.WaitGroup
	for s := range senders {
		sw.Add(1)
		go func() {
			defer sw.Done()
			h := hs[s%handles]
			var buf []byte
			for i := 0; i < per; {
				if s%2 == 0 {
					buf = encode(buf, s, uint64(i))
					if err := h.Send(ctx, buf); err != nil {
						errc <- err
						return
					}
					i++
					continue
				}
				var batch [][]byte
				for j := i; j < min(per, i+7); j++ {
					batch = append(batch, encode(nil, s, uint64(j)))
				}
				n, err := h.SendBatch(ctx, batch)
				if err != nil {
					errc <- err
					return
				}
				i += n
			}
		}()
	}
	sw.Wait()
	ok(t, "CloseSend", hs[0].CloseSend(ctx))
	wg.Wait()
	close(errc)
	for err := range errc {
		ok(t, "sender or receiver", err)
	}
	chk.report(t)
	chk.allTaken(t, senders, per)
}
