package redislock

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// A channel handle's sends and receives carry ids, and those that changed
// the channel leave a receipt under the id in a hash of the handle
// (chan_common.lua). A request sent again because its reply was lost — by
// go-redis after a broken connection or a timeout, or by this package after
// a redirection — finds its receipt and gets the same reply: a receive does
// not take a second batch while the first is lost with the reply, a send
// does not append its messages twice. A receive whose call failed all the
// same is restored (its messages go back to the head of the list) by the
// handle's next receive, or by Close.

// chanReceiptTTL bounds how long a handle's receipts outlive its last
// request: a handle that dies without Close leaves them this long.
const chanReceiptTTL = 10 * time.Minute

// chanForgetMax bounds the receipts one request forgets or restores, so
// that its argument list stays short; the rest go with the next.
const chanForgetMax = 64

type receipts struct {
	key string // the handle's hash
	seq atomic.Uint64

	used atomic.Bool // a request was made: a receipt may exist

	mu   sync.Mutex
	done []string // guarded by mu: receipts whose replies arrived
	lost []string // guarded by mu: receives whose replies never arrived
}

func newReceipts(base string) *receipts {
	return &receipts{key: base + "rcpt:" + strconv.FormatUint(rand.Uint64(), 36)}
}

// next returns the id of a new request.
func (r *receipts) next() string {
	if !r.used.Load() {
		r.used.Store(true)
	}
	return strconv.FormatUint(r.seq.Add(1), 36)
}

// take moves up to chanForgetMax ids out of *from and returns args with
// them appended (their count first when counted) and the ids, which give
// back puts back when the request fails.
func (r *receipts) take(args []any, from *[]string, counted bool) ([]any, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := min(len(*from), chanForgetMax)
	if counted {
		args = append(args, n)
	}
	ids := (*from)[len(*from)-n:]
	for _, id := range ids {
		args = append(args, id)
	}
	*from = (*from)[: len(*from)-n : len(*from)-n]
	return args, ids
}

// giveBack returns ids taken for a request that failed.
func (r *receipts) giveBack(to *[]string, ids []string) {
	if len(ids) > 0 {
		r.mu.Lock()
		*to = append(*to, ids...)
		r.mu.Unlock()
	}
}

// settled records the end of request id: its reply arrived (err nil),
// having left a receipt or not (kept), or it failed (a receive's batch is
// then restored by the next receive).
func (r *receipts) settled(id string, kept bool, err error, recv bool) {
	if err == nil && !kept {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil && recv {
		r.lost = append(r.lost, id)
	} else {
		r.done = append(r.done, id)
	}
}

// releaseReceipts restores the handle's failed receives and deletes its
// receipts (Close).
func (c *chanDriver) releaseReceipts() {
	if !c.r.used.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.d.o.RequestTimeout)
	defer cancel()
	for {
		args, ids := c.r.take([]any{c.k.rwake}, &c.r.lost, false)
		if _, err := scriptChanRelease.Run(ctx, c.d.c, c.rk, args...).Result(); err != nil || len(ids) < chanForgetMax {
			return // on an error, the receipts expire
		}
	}
}
