package locktest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// testQueueHammer: handles × goroutines putting, claiming and acking (and
// failing some jobs once) at once: every job is acked exactly once, no
// token is given twice, and the queue ends empty.
func testQueueHammer(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	const handles, producers, consumers, per = 3, 2, 3, 150
	total := handles * producers * per
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var (
		mu     sync.Mutex
		acked  = make(map[string]int)       // payload → acks; guarded by mu
		tokens = make(map[baton.Token]bool) // guarded by mu
		failed = make(map[string]bool)      // failed once; guarded by mu
		fail   = func(err error) { t.Error(err); cancel() }
		wg     sync.WaitGroup
		done   = make(chan struct{})
		once   sync.Once
	)
	var qs []baton.Queue
	for range handles {
		qs = append(qs, openQueue(t, b, ctx, name))
	}
	for h, q := range qs {
		for p := range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < per; {
					payload := fmt.Sprintf("%d/%d/%d", h, p, i)
					if i%10 == 0 && i+3 <= per {
						specs := make([]baton.JobSpec, 3)
						for k := range specs {
							specs[k].Payload = []byte(fmt.Sprintf("%d/%d/%d", h, p, i+k))
						}
						if _, err := q.PutBatch(ctx, specs); err != nil {
							fail(fmt.Errorf("PutBatch: %w", err))
							return
						}
						i += 3
						continue
					}
					if _, err := q.Put(ctx, []byte(payload)); err != nil {
						fail(fmt.Errorf("Put: %w", err))
						return
					}
					i++
				}
			}()
		}
	}
	var consumersWG sync.WaitGroup
	for _, q := range qs {
		for range consumers {
			consumersWG.Add(1)
			go func() {
				defer consumersWG.Done()
				for {
					j, err := q.Claim(ctx)
					if err != nil {
						select {
						case <-done:
						default:
							fail(fmt.Errorf("Claim: %w", err))
						}
						return
					}
					key := string(j.Payload())
					mu.Lock()
					if tokens[j.Token()] {
						t.Errorf("token %d given twice", j.Token())
					}
					tokens[j.Token()] = true
					retry := !failed[key] && j.Token()%7 == 0
					failed[key] = failed[key] || retry
					mu.Unlock()
					if retry {
						if err := j.Fail(ctx, "once"); err != nil {
							fail(fmt.Errorf("Fail: %w", err))
							return
						}
						continue
					}
					if err := j.Ack(ctx); err != nil {
						fail(fmt.Errorf("Ack: %w", err))
						return
					}
					mu.Lock()
					acked[key]++
					n := len(acked)
					mu.Unlock()
					if n == total {
						once.Do(func() { close(done) })
					}
				}
			}()
		}
	}
	wg.Wait()
	select {
	case <-done:
	case <-ctx.Done():
	}
	cancel()
	consumersWG.Wait()
	if t.Failed() {
		return
	}
	for key, n := range acked {
		if n != 1 {
			t.Errorf("job %s acked %d times", key, n)
		}
	}
	if len(acked) != total {
		t.Errorf("%d jobs acked, want %d", len(acked), total)
	}
	wantStats(t, "after the hammer", qs[0], baton.QueueStats{})
	t.Logf("%d jobs through %d handles × (%d producers, %d consumers), %d claims", total, handles, producers, consumers, len(tokens))
}

// jobIndex parses a payload made by strconv.Itoa.
func jobIndex(p []byte, n int) (int, error) {
	i, err := strconv.Atoi(string(p))
	if err != nil || i < 0 || i >= n {
		return 0, errors.New("foreign payload " + strconv.Quote(string(p)))
	}
	return i, nil
}

// testQueueManySleepers: claimants of several handles all blocked on an
// empty queue, each taking one job and holding it: a batch and single
// jobs put meanwhile reach every one of them (no wake-up is lost, however
// many claimants the backend wakes per job).
func testQueueManySleepers(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	const per = 5 // claimants per handle
	qs := []baton.Queue{openQueue(t, b, ctx, name), openQueue(t, b, ctx, name)}
	p := openQueue(t, b, ctx, name)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	jobs := len(qs) * per
	got := make(chan *baton.Job, jobs)
	var wg sync.WaitGroup
	for _, q := range qs {
		for range per {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if j, err := q.Claim(ctx); err == nil {
					got <- j
				}
			}()
		}
	}
	time.Sleep(50 * time.Millisecond)
	specs := make([]baton.JobSpec, jobs-4)
	for i := range specs {
		specs[i].Payload = []byte("batch")
	}
	_, err := p.PutBatch(ctx, specs)
	ok(t, "PutBatch", err)
	for range 4 {
		_, err := p.Put(ctx, []byte("single"))
		ok(t, "Put", err)
	}
	seen := map[baton.JobID]bool{}
	for len(seen) < jobs {
		select {
		case j := <-got:
			if seen[j.ID()] {
				t.Errorf("job %d claimed twice", j.ID())
			}
			seen[j.ID()] = true
			defer j.Ack(context.Background())
		case <-time.After(20 * time.Second):
			s, _ := p.Stats(context.Background())
			t.Fatalf("%d of %d jobs claimed; the rest were not handed to the waiting claimants: %+v", len(seen), jobs, s)
		}
	}
	cancel()
	wg.Wait()
}

// queueEvents records the events of one queue.
type queueEvents struct {
	mu sync.Mutex
	es []baton.Event
}

func (o *queueEvents) Observe(e baton.Event) {
	o.mu.Lock()
	o.es = append(o.es, e)
	o.mu.Unlock()
}

// testQueueObserved: an Observer sees a claim as an acquisition (started,
// then acquired with its token, or failed), an Ack as a release, and a
// TryClaim of an empty queue as a failure and an error.
func testQueueObserved(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	q := openQueue(t, b, ctx, name)
	var o queueEvents
	ok(t, "Observe", baton.Observe(b, &o))
	defer baton.Observe(b, nil)
	_, err := q.Put(ctx, []byte("x"))
	ok(t, "Put", err)
	j := claim(t, q, "x")
	ok(t, "Ack", j.Ack(ctx))
	_, err = q.TryClaim(ctx)
	is(t, "TryClaim", err, baton.ErrEmpty)
	o.mu.Lock()
	defer o.mu.Unlock()
	var got []string
	for _, e := range o.es {
		if e.Kind != baton.KindQueue || e.Name != name || e.Backend == "" {
			t.Errorf("event %+v", e)
		}
		got = append(got, e.Type.String()+"/"+e.Op)
		if e.Type == baton.EventAcquired && e.Token != j.Token() {
			t.Errorf("acquired with token %d, want %d", e.Token, j.Token())
		}
	}
	want := []string{"acquire/claim", "acquired/claim", "released/ack", "acquire/tryclaim", "error/tryclaim", "failed/tryclaim"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %v, want %v", got, want)
	}
}
