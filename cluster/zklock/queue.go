package zklock

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// Work queues (baton.Queue). Node layout, with Q the queue's directory
// P/queue/<n>:
//
//	Q/n                  persistent; the last job id given (decimal)
//	Q/r/<at>-<id>        persistent; a pending job (ready, delayed or
//	                     claimed): its record; <at> when it is ready (Unix
//	                     ns), <id> its id, 16 hex digits each, so that
//	                     names sort oldest ready first
//	Q/c/<id>             ephemeral; a claim, held by the claimant's session
//	Q/k/<hex key>        persistent; a uniqueness key of a pending job; data: its id
//	Q/d/<id>             persistent; a dead letter
//
// A job's record stays while it is claimed: a claim is the ephemeral node
// beside it, created in one multi-op with a versioned rewrite of the
// record (its attempts), so a claim dies with its session and the job is
// ready again in its old place. The claim's Loss is tracked by the epoch
// it was made in, which ends before the server can expire the session
// (see session.go): the loss fires before anyone else can claim the job.
// The fencing token is the multi-op's zxid (shifted, so that the jobs of
// one batch claim have tokens of their own). An Ack or Retry is a multi-op
// that deletes the claim node and the record at the version the claim
// wrote, so it fails, changing nothing, once the claim is gone.

// Limits: a request is at most the server's jute.maxbuffer (1 MiB less a
// byte by default), and a Put of a batch, or a claim of several jobs, is
// one request.
const (
	maxZKPayload  = 1<<20 - 64<<10
	maxZKRequest  = 1<<20 - 32<<10
	zkJobOverhead = 256
	zkTokenBits   = 10
)

// errClaimGone is the cause of a claim's loss found at its end.
var errClaimGone = errors.New("the claim's node is gone")

// queueDriver is one handle of a queue.
type queueDriver struct {
	b   *backend
	dir string

	mu     sync.Mutex
	claims map[*qclaim]struct{} // guarded by mu; given back at Close
	closed bool                 // guarded by mu
	// The id counter as this handle's last Put left it (its value and
	// version, known when lastOK), and whether a Put may take it as still
	// current: set once a read found the counter as the handle had left
	// it (nobody else puts), cleared by a write that found otherwise.
	// Guarded by mu.
	lastSeq       uint64
	lastVer       int32
	lastOK, alone bool
	// The handle's last list of the claims was empty, and no claim since
	// found a job claimed by another: a claim that does not wait then
	// skips the list (the claim's multi-op still checks that the claim
	// node is absent, and a conflict lists the claims again). Guarded by
	// mu.
	noClaims bool
}

// qclaim is the driver's state of one claim.
type qclaim struct {
	e      *epoch
	job    qjob   // attempts counts this claim
	rname  string // the record's node name
	rver   int32  // the record's version the claim wrote
	loss   *driver.Loss
	holder string // the claim node's data, unique to the claim
	// unsure are the ends of the claim whose request failed: any one of
	// them may have been applied (queue_unsure.go). Only the call that
	// ends the claim uses it, one at a time.
	unsure []endTry
}

// OpenQueue opens a work queue (driver.QueueOpener). Its nodes are made by
// the first Put.
func (b *backend) OpenQueue(_ context.Context, name string) (driver.Queue, error) {
	return &queueDriver{b: b, dir: b.dir(baton.KindQueue, name), claims: make(map[*qclaim]struct{})}, nil
}

// MaxPayload is 960 KiB: a job travels in one request, which the server
// refuses above its jute.maxbuffer (1 MiB by default); a PutBatch must
// fit in one request as a whole.
func (d *queueDriver) MaxPayload() int { return maxZKPayload }

// qjob is a pending job's record.
type qjob struct {
	id       uint64
	at       int64
	attempts int
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

func deadRecord(j qjob, reason string, at time.Time) []byte {
	v := binary.AppendVarint(nil, at.UnixNano())
	v = binary.AppendUvarint(v, uint64(len(reason)))
	v = append(v, reason...)
	return append(v, j.encode()...)
}

func decodeDead(id uint64, v []byte) (qjob, driver.DeadJob, error) {
	at, n := binary.Varint(v)
	if n <= 0 {
		return qjob{}, driver.DeadJob{}, errRecord
	}
	v = v[n:]
	l, n := binary.Uvarint(v)
	if n <= 0 || l > uint64(len(v)-n) {
		return qjob{}, driver.DeadJob{}, errRecord
	}
	reason := string(v[n : n+int(l)])
	j, err := decodeJob(id, 0, v[n+int(l):])
	return j, driver.DeadJob{ID: id, Payload: j.payload, Attempts: j.attempts, Reason: reason, At: time.Unix(0, at)}, err
}

func rname(at int64, id uint64) string { return fmt.Sprintf("%016x-%016x", at, id) }

// parseR reads the ready time and id of a record's name.
func parseR(name string) (int64, uint64, bool) {
	a, i, ok := strings.Cut(name, "-")
	at, err1 := strconv.ParseUint(a, 16, 64)
	id, err2 := strconv.ParseUint(i, 16, 64)
	return int64(at), id, ok && err1 == nil && err2 == nil
}

func (d *queueDriver) r(name string) string { return d.dir + "/r/" + name }
func (d *queueDriver) c(id uint64) string   { return fmt.Sprintf("%s/c/%016x", d.dir, id) }
func (d *queueDriver) dead(id uint64) string {
	return fmt.Sprintf("%s/d/%016x", d.dir, id)
}
func (d *queueDriver) k(key string) string { return d.dir + "/k/" + hex.EncodeToString([]byte(key)) }

// get reads a node within the request timeout.
func (d *queueDriver) get(ctx context.Context, path string) ([]byte, *zk.Stat, error) {
	type r struct {
		v  []byte
		st *zk.Stat
	}
	res, err := req(d.b, ctx, func() (r, error) { v, st, err := d.b.c.Get(path); return r{v, st}, err })
	return res.v, res.st, err
}

func (d *queueDriver) children(ctx context.Context, path string) ([]string, error) {
	return req(d.b, ctx, func() ([]string, error) { cs, _, err := d.b.c.Children(path); return cs, err })
}

func (d *queueDriver) multi(ctx context.Context, ops ...any) ([]zk.MultiResponse, error) {
	return req(d.b, ctx, func() ([]zk.MultiResponse, error) { return d.b.c.Multi(ops...) })
}

// ensure makes the queue's nodes.
func (d *queueDriver) ensure() error {
	for _, p := range []string{"/r", "/c", "/k", "/d"} {
		if err := d.b.ensure(d.dir+p, nil); err != nil {
			return err
		}
	}
	if _, err := d.b.c.Create(d.dir+"/n", []byte("0"), 0, d.b.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	return nil
}

// conflict reports whether a multi-op failed because another client
// changed what it compared: read again.
func conflict(err error) bool {
	return errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrNoNode)
}

// Put adds the jobs in one multi-op, which compares the id counter's
// version and every uniqueness key read before it.
func (d *queueDriver) Put(ctx context.Context, jobs []driver.PutJob) ([]uint64, error) {
	size := 0
	for _, j := range jobs {
		size += len(j.Payload) + 3*len(j.Key) + zkJobOverhead
	}
	if size > maxZKRequest {
		return nil, fmt.Errorf("%w: %d jobs take about %d bytes, over the %d bytes one ZooKeeper request carries", baton.ErrInvalidArgument, len(jobs), size, maxZKRequest)
	}
	for {
		ids, err := d.tryPut(ctx, jobs)
		switch {
		case err == nil:
			return ids, nil
		case errors.Is(err, zk.ErrNoNode):
			// The queue's nodes were never made: make them. (Also a
			// key deleted between the read and the write: read again.)
			if _, err := req(d.b, ctx, func() (struct{}, error) { return struct{}{}, d.ensure() }); err != nil {
				return nil, err
			}
		case conflict(err):
		default:
			return nil, err
		}
	}
}

// tryPut reads the counter and the keys, then writes in one multi-op. A
// handle that is the queue's only producer skips the read of the counter
// (a Put of jobs without keys is then one round trip): it writes against
// the counter as its last Put left it, and a multi-op that finds it
// changed makes the next tries read again.
func (d *queueDriver) tryPut(ctx context.Context, jobs []driver.PutJob) ([]uint64, error) {
	keyless := !slices.ContainsFunc(jobs, func(j driver.PutJob) bool { return j.Key != "" })
	d.mu.Lock()
	seq, ver, lastOK, optimistic := d.lastSeq, d.lastVer, d.lastOK, d.alone && d.lastOK && keyless
	d.mu.Unlock()
	if !optimistic {
		v, st, err := d.get(ctx, d.dir+"/n")
		if err != nil {
			return nil, err
		}
		read, _ := strconv.ParseUint(string(v), 10, 64)
		d.mu.Lock()
		d.alone = lastOK && read == seq && st.Version == ver
		d.mu.Unlock()
		seq, ver = read, st.Version
	}
	ops := []any{&zk.SetDataRequest{Path: d.dir + "/n", Version: ver}}
	held := map[string]uint64{}
	checked := map[string]bool{}
	for _, j := range jobs {
		if j.Key == "" || checked[j.Key] {
			continue
		}
		checked[j.Key] = true
		kv, kst, err := d.get(ctx, d.k(j.Key))
		switch {
		case err == nil:
			held[j.Key], _ = strconv.ParseUint(string(kv), 10, 64)
			ops = append(ops, &zk.CheckVersionRequest{Path: d.k(j.Key), Version: kst.Version})
		case !errors.Is(err, zk.ErrNoNode):
			return nil, err
		}
	}
	now := time.Now().UnixNano()
	ids := make([]uint64, len(jobs))
	for i, j := range jobs {
		if id, ok := held[j.Key]; ok && j.Key != "" {
			ids[i] = id
			continue
		}
		seq++
		ids[i] = seq
		at := now
		if !j.At.IsZero() {
			at = max(at, j.At.UnixNano())
		}
		if j.Key != "" {
			held[j.Key] = seq
			ops = append(ops, &zk.CreateRequest{Path: d.k(j.Key), Data: []byte(strconv.FormatUint(seq, 10)), Acl: d.b.acl})
		}
		rec := qjob{id: seq, at: at, max: j.MaxAttempts, key: j.Key, payload: j.Payload}
		ops = append(ops, &zk.CreateRequest{Path: d.r(rname(at, seq)), Data: rec.encode(), Acl: d.b.acl})
	}
	ops[0].(*zk.SetDataRequest).Data = []byte(strconv.FormatUint(seq, 10))
	res, err := d.multi(ctx, ops...)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.lastOK, d.alone = false, false
		return nil, err
	}
	d.lastOK = len(res) > 0 && res[0].Stat != nil
	if d.lastOK {
		d.lastSeq, d.lastVer = seq, res[0].Stat.Version
	}
	return ids, nil
}

// keyOps deletes a job's uniqueness key if the job still has it.
func (d *queueDriver) keyOps(ctx context.Context, j qjob) ([]any, error) {
	if j.key == "" {
		return nil, nil
	}
	v, st, err := d.get(ctx, d.k(j.key))
	if errors.Is(err, zk.ErrNoNode) || (err == nil && string(v) != strconv.FormatUint(j.id, 10)) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return []any{&zk.DeleteRequest{Path: d.k(j.key), Version: st.Version}}, nil
}

// Ack deletes the job and its claim, if the claim is still there.
func (d *queueDriver) Ack(ctx context.Context, dc driver.Claim) error {
	c := dc.Data.(*qclaim)
	ops, err := d.keyOps(ctx, c.job)
	if err != nil {
		return err
	}
	return d.end(ctx, c, endTry{}, ops)
}

// Retry puts the job back at at (now if zero or past), or makes it a dead
// letter when the claim was its last attempt.
func (d *queueDriver) Retry(ctx context.Context, dc driver.Claim, at time.Time, reason string) error {
	c := dc.Data.(*qclaim)
	if c.job.attempts >= c.job.max {
		ops, err := d.keyOps(ctx, c.job)
		if err != nil {
			return err
		}
		dp := d.dead(c.job.id)
		ops = append(ops, &zk.CreateRequest{Path: dp, Data: deadRecord(c.job, reason, time.Now()), Acl: d.b.acl})
		return d.end(ctx, c, endTry{put: dp}, ops)
	}
	j := c.job
	j.at = time.Now().UnixNano()
	if !at.IsZero() {
		j.at = max(j.at, at.UnixNano())
	}
	rp := d.r(rname(j.at, j.id))
	return d.end(ctx, c, endTry{put: rp}, []any{&zk.CreateRequest{Path: rp, Data: j.encode(), Acl: d.b.acl}})
}

// end deletes the claim node and the record at the version the claim
// wrote, then runs ops, the end e, in one multi-op; when the claim is gone
// nothing changes and the claim is lost, unless an earlier end whose
// outcome was unknown took effect (settleEnd).
func (d *queueDriver) end(ctx context.Context, c *qclaim, e endTry, ops []any) error {
	all := append([]any{&zk.DeleteRequest{Path: d.c(c.job.id), Version: 0}, &zk.DeleteRequest{Path: d.r(c.rname), Version: c.rver}}, ops...)
	_, err := d.multi(ctx, all...)
	if conflict(err) && len(c.unsure) > 0 {
		if done, serr := d.settleEnd(ctx, c, e); done || serr != nil {
			if done {
				d.gone(c.rname)
			}
			d.forget(c)
			return serr
		}
	}
	if conflict(err) {
		c.loss.Fire(errClaimGone)
		d.forget(c)
		return fmt.Errorf("%w: job %d: %w", baton.ErrLost, c.job.id, errClaimGone)
	}
	if err != nil {
		c.unsure = append(c.unsure, e)
		return err // the outcome is unknown: the core lets it be tried again
	}
	d.gone(c.rname)
	d.forget(c)
	return nil
}

func (d *queueDriver) forget(c *qclaim) {
	d.unmark(c)
	c.e.untrack(c.loss)
	d.mu.Lock()
	delete(d.claims, c)
	d.mu.Unlock()
}

// Close gives back the claims still held: their losses fire, then their
// nodes are deleted (by the session's end, at the latest).
func (d *queueDriver) Close() error {
	d.mu.Lock()
	d.closed = true
	cs := d.claims
	d.claims = nil
	d.mu.Unlock()
	for c := range cs {
		d.giveBack(c)
	}
	return nil
}

// giveBack fires a claim's loss and deletes its node if it is still the
// claim's.
func (d *queueDriver) giveBack(c *qclaim) {
	d.unmark(c)
	c.loss.Fire(baton.ErrClosed)
	c.e.untrack(c.loss)
	d.dropClaim(d.c(c.job.id), c.holder)
}

// dropClaim deletes the claim node at path if its data is holder (a claim
// of this driver's, not of whoever claimed the job since).
func (d *queueDriver) dropClaim(path, holder string) {
	ctx, cancel := context.WithTimeout(context.Background(), d.b.o.RequestTimeout)
	defer cancel()
	v, st, err := d.get(ctx, path)
	if err == nil && string(v) == holder {
		_, _ = req(d.b, ctx, func() (struct{}, error) { return struct{}{}, d.b.c.Delete(path, st.Version) })
	}
}

var _ driver.QueueOpener = (*backend)(nil)
