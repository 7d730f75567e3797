package etcdlock

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// Work queues (baton.Queue). Key layout, with Q the queue's directory
// P queue/<n>/ (see backend.go):
//
//	Q n                 the last job id given (decimal)
//	Q r/<at>/<id>       a pending job (ready, delayed or claimed): its record;
//	                    <at> is when it is ready (Unix ns), <id> its id, both
//	                    16 hex digits, so that keys sort oldest ready first
//	Q c/<id>            a claim, bound to the claimant's session lease
//	Q k/<hex key>       a uniqueness key of a pending job; value: its id
//	Q d/<id>            a dead letter
//
// A job's record stays under r/ while it is claimed: a claim is the c/ key
// beside it, so a claim whose lease ends (revoked, expired with its
// process) is gone with it, and the job is ready again in its old place.
// The claimant's session fires the claim's Loss at the lease's local
// deadline, before the server can expire it, and its watch of the claim
// key fires it when the key is deleted otherwise. A claim is a
// transaction that compares the record's revision and the claim key's
// absence; its fencing token is the transaction's revision (shifted, so
// that the jobs of one batch claim have tokens of their own).

// Limits of etcd's queues: a request carries at most --max-request-bytes
// (1.5 MiB by default), and a transaction at most --max-txn-ops
// operations (128 by default). A Put of n jobs is one transaction of
// n+1 operations, 2n+1 with uniqueness keys, so a server that takes
// batches of baton.MaxBatch must run with --max-txn-ops 2001 or more.
const (
	maxQueuePayload = 1 << 20
	// maxQueueRequest is what one transaction may carry: the server's
	// default request limit less room for the request's framing.
	maxQueueRequest = 1536*1024 - 16*1024
	// jobOverhead bounds the keys and fields a job adds to a request.
	jobOverhead = 192
	// tokenBits numbers the claims of one transaction within its
	// revision (batch claims take at most baton.MaxBatch jobs).
	tokenBits = 10
)

// errClaimGone is the cause of a claim's loss found at its end.
var errClaimGone = errors.New("the claim's key is gone")

// queueDriver is one handle of a queue.
type queueDriver struct {
	b   *backend
	dir string

	mu     sync.Mutex
	claims map[*qclaim]struct{} // guarded by mu; claims held, given back at Close
	closed bool                 // guarded by mu
	width  int                  // guarded by mu; in-flight claims at the last read
	// The id sequence this handle's last Put wrote, and the revision it
	// wrote it at; 0 when unknown. Guarded by mu.
	lastSeq uint64
	lastRev int64
}

// qclaim is the driver's state of one claim.
type qclaim struct {
	s          *session
	job        qjob // attempts counts this claim
	ckey, rkey string
	gkey       string // ckey guarded by the claim's value, for clean-ups
	rev        int64  // the claim key's create revision
	loss       *driver.Loss
	hw         *holdWatch
}

// OpenQueue opens a work queue (driver.QueueOpener). Nothing is written
// until the first Put.
func (b *backend) OpenQueue(_ context.Context, name string) (driver.Queue, error) {
	return &queueDriver{b: b, dir: b.dir(baton.KindQueue, name), claims: make(map[*qclaim]struct{})}, nil
}

// MaxPayload is 1 MiB: a job and its keys travel in one etcd request,
// which the server refuses above its --max-request-bytes (1.5 MiB by
// default); a PutBatch must fit in one request as a whole.
func (d *queueDriver) MaxPayload() int { return maxQueuePayload }

// qjob is a pending job's record.
type qjob struct {
	id       uint64
	at       int64 // ready at, Unix ns
	attempts int   // claims so far
	max      int
	key      string
	payload  []byte
}

func (j *qjob) encode() []byte {
	v := make([]byte, 0, 3*binary.MaxVarintLen64+len(j.key)+len(j.payload))
	v = binary.AppendUvarint(v, uint64(j.attempts))
	v = binary.AppendUvarint(v, uint64(j.max))
	v = binary.AppendUvarint(v, uint64(len(j.key)))
	v = append(v, j.key...)
	return append(v, j.payload...)
}

var errRecord = errors.New("malformed job record")

// decodeJob reads the record of a job; the payload is a copy.
func decodeJob(id uint64, at int64, v []byte) (qjob, error) {
	j := qjob{id: id, at: at}
	var f [3]uint64
	for i := range f {
		x, n := binary.Uvarint(v)
		if n <= 0 {
			return j, errRecord
		}
		f[i], v = x, v[n:]
	}
	if f[2] > uint64(len(v)) {
		return j, errRecord
	}
	j.attempts, j.max, j.key = int(f[0]), int(f[1]), string(v[:f[2]])
	j.payload = append([]byte{}, v[f[2]:]...)
	return j, nil
}

// deadRecord is a dead letter's value: when it died, why, and its job.
func deadRecord(j qjob, reason string, at time.Time) []byte {
	v := binary.AppendVarint(nil, at.UnixNano())
	v = binary.AppendUvarint(v, uint64(len(reason)))
	v = append(v, reason...)
	return append(v, j.encode()...)
}

func decodeDead(id uint64, v []byte) (qjob, baton.DeadLetter, error) {
	at, n := binary.Varint(v)
	if n <= 0 {
		return qjob{}, baton.DeadLetter{}, errRecord
	}
	v = v[n:]
	l, n := binary.Uvarint(v)
	if n <= 0 || l > uint64(len(v)-n) {
		return qjob{}, baton.DeadLetter{}, errRecord
	}
	reason := string(v[n : n+int(l)])
	j, err := decodeJob(id, 0, v[n+int(l):])
	return j, baton.DeadLetter{ID: baton.JobID(id), Payload: j.payload, Attempts: j.attempts, Reason: reason, At: time.Unix(0, at)}, err
}

func (d *queueDriver) rkey(at int64, id uint64) string {
	return fmt.Sprintf("%sr/%016x/%016x", d.dir, at, id)
}
func (d *queueDriver) ckey(id uint64) string { return fmt.Sprintf("%sc/%016x", d.dir, id) }
func (d *queueDriver) dkey(id uint64) string { return fmt.Sprintf("%sd/%016x", d.dir, id) }
func (d *queueDriver) kkey(k string) string  { return d.dir + "k/" + hex.EncodeToString([]byte(k)) }

// parseID reads the id at the end of a queue key.
func parseID(key []byte) uint64 {
	k := string(key)
	id, _ := strconv.ParseUint(k[strings.LastIndexByte(k, '/')+1:], 16, 64)
	return id
}

// parseReady reads the ready time and id of an r/ key.
func (d *queueDriver) parseReady(key []byte) (int64, uint64) {
	k := strings.TrimPrefix(string(key), d.dir+"r/")
	at, _ := strconv.ParseUint(k[:min(16, len(k))], 16, 64)
	return int64(at), parseID(key)
}

// dropKey deletes a job's uniqueness key if the job still has it.
func (d *queueDriver) dropKey(j qjob) []clientv3.Op {
	if j.key == "" {
		return nil
	}
	k := d.kkey(j.key)
	return []clientv3.Op{clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.Value(k), "=", strconv.FormatUint(j.id, 10))},
		[]clientv3.Op{clientv3.OpDelete(k)}, nil)}
}

// sleepCtx waits d, or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Ack deletes the job and its claim, if the claim is still the key's.
func (d *queueDriver) Ack(ctx context.Context, dc driver.Claim) error {
	c := dc.Data.(*qclaim)
	ops := append([]clientv3.Op{clientv3.OpDelete(c.ckey), clientv3.OpDelete(c.rkey)}, d.dropKey(c.job)...)
	return d.end(ctx, c, ops)
}

// Retry puts the job back at at (now if zero or past), or makes it a dead
// letter when the claim was its last attempt.
func (d *queueDriver) Retry(ctx context.Context, dc driver.Claim, at time.Time, reason string) error {
	c := dc.Data.(*qclaim)
	ops := []clientv3.Op{clientv3.OpDelete(c.ckey), clientv3.OpDelete(c.rkey)}
	if c.job.attempts >= c.job.max {
		ops = append(ops, clientv3.OpPut(d.dkey(c.job.id), string(deadRecord(c.job, reason, time.Now()))))
		ops = append(ops, d.dropKey(c.job)...)
		return d.end(ctx, c, ops)
	}
	j := c.job
	j.at = time.Now().UnixNano()
	if !at.IsZero() {
		j.at = max(j.at, at.UnixNano())
	}
	ops = append(ops, clientv3.OpPut(d.rkey(j.at, j.id), string(j.encode())))
	return d.end(ctx, c, ops)
}

// end runs ops if the claim key is still the claim's; otherwise the claim
// was lost (its lease ended, or the key was deleted) and nothing changes.
func (d *queueDriver) end(ctx context.Context, c *qclaim, ops []clientv3.Op) error {
	// The watch must not take the claim's own delete for a loss.
	c.hw.release()
	rctx, cancel := d.b.rctx(ctx)
	resp, err := d.b.c.Txn(rctx).If(clientv3.Compare(clientv3.CreateRevision(c.ckey), "=", c.rev)).Then(ops...).Commit()
	cancel()
	if err != nil {
		return lease.CtxErr(ctx, err) // the outcome is unknown: the core lets it be tried again
	}
	if !resp.Succeeded {
		c.loss.Fire(errClaimGone)
		d.forget(c)
		return fmt.Errorf("%w: job %d: %w", baton.ErrLost, c.job.id, errClaimGone)
	}
	d.forget(c)
	return nil
}

// forget stops tracking a claim that ended.
func (d *queueDriver) forget(c *qclaim) {
	d.unmarkKey(c.rkey)
	c.hw.release()
	c.s.untrack(c.loss)
	d.mu.Lock()
	delete(d.claims, c)
	d.mu.Unlock()
}

// Close gives back the claims still held: their losses fire first, then
// their keys are deleted (by the lease, at the latest).
func (d *queueDriver) Close() error {
	d.mu.Lock()
	d.closed = true
	cs := d.claims
	d.claims = nil
	d.mu.Unlock()
	for c := range cs {
		d.unmarkKey(c.rkey)
		c.hw.release()
		c.loss.Fire(baton.ErrClosed)
		c.s.untrack(c.loss)
		d.b.cleanup(c.s, c.gkey)
	}
	return nil
}

var _ driver.QueueOpener = (*backend)(nil)
