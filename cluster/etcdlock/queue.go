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

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// Work queues (baton.Queue). Key layout, with Q the queue's directory
// P queue/<n>/ (see backend.go):
//
//	Q v                 the format mark: Puts name new jobs as j/ below
//	Q n                 the id sequence of the earlier format (decimal)
//	Q j/<at>/<nonce>-<pos>
//	                    a job as its Put wrote it: <at> is when it is ready
//	                    (Unix ns, 16 hex digits), <nonce> is random to the
//	                    Put (16 hex digits), <pos> its place in the Put (3
//	                    hex digits); its id is the key's create revision
//	                    shifted by idBits, plus <pos>
//	Q r/<at>/<id>       a job whose id is in its name: one given back
//	                    (Retry, a dead letter requeued), or put by the
//	                    earlier format, which took ids from Q n; <id> is
//	                    16 hex digits
//	Q c/<id>            a claim, bound to the claimant's session lease
//	Q k/<hex key>       a uniqueness key of a pending job; value: its id
//	                    (decimal), or "@<pos>" as its Put wrote it, the id
//	                    then being the key's create revision shifted, plus
//	                    <pos> (the first claim writes the id in decimal)
//	Q d/<id>            a dead letter
//
// Both record forms sort oldest ready first, and a claimant reads both
// and takes the oldest of the two. A job's record stays where it is while
// it is claimed: a claim is the c/ key beside it, so a claim whose lease
// ends (revoked, expired with its process) is gone with it, and the job is
// ready again in its old place. The claimant's session fires the claim's
// Loss at the lease's local deadline, before the server can expire it, and
// its watch of the claim key fires it when the key is deleted otherwise. A
// claim is a transaction that compares the record's revision and the
// claim key's absence; its fencing token is the transaction's revision
// (shifted, so that the jobs of one batch claim have tokens of their own).
//
// The earlier format's processes (one id sequence, records under r/ only)
// may run beside this one on a queue: they do not read j/, so they never
// claim a job they would name otherwise; every claim, of either version,
// of a job with id i is the key c/<i>; and the first Put of this format
// moves Q n up to 1<<62 as it writes Q v, so that the ids the earlier
// format gives from then on are above every id of a j/ record (whose
// revision would have to reach 1<<52), and those it gave before are below
// (each of its Puts took at most MaxBatch ids for a revision of its own).
// Tokens of both are claim revisions.

// Limits of etcd's queues: a request carries at most --max-request-bytes
// (1.5 MiB by default), and a transaction at most --max-txn-ops
// operations (128 by default). A Put of n jobs is one transaction of n
// operations, 2n with uniqueness keys, so a server that takes batches of
// baton.MaxBatch must run with --max-txn-ops 2000 or more.
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
	// idBits numbers the jobs of one Put within its revision.
	idBits = 10
	// seqFloor is where the first Put of the j/ format moves the earlier
	// format's id sequence.
	seqFloor = 1 << 62
)

// A Put's positions fit in idBits.
var _ [1<<idBits - baton.MaxBatch]struct{}

// errClaimGone is the cause of a claim's loss found at its end.
var errClaimGone = errors.New("the claim's key is gone")

// queueDriver is one handle of a queue.
type queueDriver struct {
	b   *backend
	dir string

	calls *queueCalls // shared with the queue's other handles in the Backend

	mu     sync.Mutex
	claims map[*qclaim]struct{} // guarded by mu; claims held, given back at Close
	closed bool                 // guarded by mu
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
	// unsure are the ends of the claim whose request failed: any one of
	// them may have been applied (queue_unsure.go). Only the call that
	// ends the claim uses it, one at a time.
	unsure []endTry
}

// OpenQueue opens a work queue (driver.QueueOpener). Nothing is written
// until the first Put.
func (b *backend) OpenQueue(_ context.Context, name string) (driver.Queue, error) {
	dir := b.dir(baton.KindQueue, name)
	return &queueDriver{b: b, dir: dir, calls: b.queues.Hold(dir), claims: make(map[*qclaim]struct{})}, nil
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

// jkey names the record a Put writes for the job at pos of its jobs.
func (d *queueDriver) jkey(at int64, nonce uint64, pos int) string {
	return fmt.Sprintf("%sj/%016x/%016x-%03x", d.dir, at, nonce, pos)
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

// putID is the id of the job at pos of the Put committed at rev.
func putID(rev int64, pos uint64) uint64 { return uint64(rev)<<idBits | pos }

// record is a job's record as read: its key, when it is ready, its id,
// and, for a j/ record, its place in its Put (else -1).
type record struct {
	kv  *mvccpb.KeyValue
	at  int64
	id  uint64
	pos int
}

// parseRecord reads the ready time and id of an r/ or j/ record; the id
// of a j/ record is its create revision's (see putID).
func (d *queueDriver) parseRecord(kv *mvccpb.KeyValue) record {
	k := string(kv.Key)
	r := record{kv: kv, pos: -1}
	if rest, ok := strings.CutPrefix(k, d.dir+"j/"); ok {
		at, _ := strconv.ParseUint(rest[:min(16, len(rest))], 16, 64)
		r.at = int64(at)
		name := rest[strings.LastIndexByte(rest, '/')+1:]
		if i := strings.IndexByte(name, '-'); i >= 0 {
			pos, _ := strconv.ParseUint(name[i+1:], 16, 64)
			r.pos, r.id = int(pos), putID(kv.CreateRevision, pos)
		}
		return r
	}
	k = strings.TrimPrefix(k, d.dir+"r/")
	at, _ := strconv.ParseUint(k[:min(16, len(k))], 16, 64)
	r.at, r.id = int64(at), parseID(kv.Key)
	return r
}

// readyAt reads the ready time of an r/ or j/ key.
func (d *queueDriver) readyAt(key []byte) int64 {
	k := string(key)
	if rest, ok := strings.CutPrefix(k, d.dir+"j/"); ok {
		k = rest
	} else {
		k = strings.TrimPrefix(k, d.dir+"r/")
	}
	at, _ := strconv.ParseUint(k[:min(16, len(k))], 16, 64)
	return int64(at)
}

// keyID reads the id a uniqueness key holds (see the key layout).
func keyID(kv *mvccpb.KeyValue) uint64 {
	v := string(kv.Value)
	if p, ok := strings.CutPrefix(v, "@"); ok {
		pos, _ := strconv.ParseUint(p, 10, 64)
		return putID(kv.CreateRevision, pos)
	}
	id, _ := strconv.ParseUint(v, 10, 64)
	return id
}

// dropKey deletes a job's uniqueness key if the job still has it. The
// job has been claimed, and its first claim wrote its id in the key.
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
	return d.end(ctx, c, endTry{}, ops)
}

// Retry puts the job back at at (now if zero or past), or makes it a dead
// letter when the claim was its last attempt.
func (d *queueDriver) Retry(ctx context.Context, dc driver.Claim, at time.Time, reason string) error {
	c := dc.Data.(*qclaim)
	ops := []clientv3.Op{clientv3.OpDelete(c.ckey), clientv3.OpDelete(c.rkey)}
	if c.job.attempts >= c.job.max {
		dk := d.dkey(c.job.id)
		ops = append(ops, clientv3.OpPut(dk, string(deadRecord(c.job, reason, time.Now()))))
		ops = append(ops, d.dropKey(c.job)...)
		return d.end(ctx, c, endTry{put: dk}, ops)
	}
	j := c.job
	j.at = time.Now().UnixNano()
	if !at.IsZero() {
		j.at = max(j.at, at.UnixNano())
	}
	rk := d.rkey(j.at, j.id)
	ops = append(ops, clientv3.OpPut(rk, string(j.encode())))
	return d.end(ctx, c, endTry{put: rk}, ops)
}

// end runs ops, the end e, if the claim key is still the claim's;
// otherwise the claim was lost (its lease ended, or the key was deleted)
// and nothing changes, unless an earlier end whose outcome was unknown
// took effect (settleEnd).
func (d *queueDriver) end(ctx context.Context, c *qclaim, e endTry, ops []clientv3.Op) error {
	// The watch must not take the claim's own delete for a loss.
	c.hw.release()
	ok, err := d.gatheredEnd(ctx, c, ops)
	if err != nil {
		c.unsure = append(c.unsure, e)
		return lease.CtxErr(ctx, err) // the outcome is unknown: the core lets it be tried again
	}
	if !ok && len(c.unsure) > 0 {
		if done, err := d.settleEnd(ctx, c, e); done || err != nil {
			d.forget(c)
			return err
		}
	}
	if !ok {
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
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	cs := d.claims
	d.claims = nil
	d.mu.Unlock()
	d.b.queues.Drop(d.dir)
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
