// Package etcdfence makes fenced writes to etcd: writes that carry a baton
// fencing token and that etcd refuses when the token is lower than the
// highest one accepted before for the same fence key. A holder paused or
// partitioned past its lease, whose lock another holder has taken and
// written under since, therefore cannot overwrite the newer holder's data,
// even if it never looks at Hold.Lost.
//
// The check, the writes and the advance of the fence key are one etcd
// transaction: If(value(fence key) > token) Then(read the fence key)
// Else(put the token, the caller's operations). The fence key holds the
// highest token as a 20-digit zero-padded decimal, so that etcd's byte
// comparison of values is the numeric comparison of tokens over the whole
// 64 bits; a missing fence key (no write yet) fails every value comparison
// and so accepts any token. Give each resource one fence key, and each
// fence key one lock name; the key has no lease and stays.
//
// Refusals are *fence.StaleError values: errors.Is(err, fence.ErrStale)
// and errors.Is(err, baton.ErrLost) hold. Equal tokens are accepted (one
// hold writing more than once), as by every guard of package fence.
//
// The package is apart from cluster/etcdlock, so that a resource in etcd
// can be fenced whatever backend the lock is on.
package etcdfence

import (
	"context"
	"fmt"
	"strconv"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/fence"
)

// Fence is the highest token accepted for one resource, kept in a key of
// an etcd cluster. It is safe for concurrent use; every write is one
// transaction.
type Fence struct {
	kv  clientv3.KV
	key string
}

// New returns the fence kept at key on kv (a *clientv3.Client, or its KV
// with a namespace). It makes no request.
func New(kv clientv3.KV, key string) (*Fence, error) {
	if kv == nil || key == "" {
		return nil, fmt.Errorf("%w: etcdfence: nil client or empty key", baton.ErrInvalidArgument)
	}
	return &Fence{kv: kv, key: key}, nil
}

// Key returns the fence key.
func (f *Fence) Key() string { return f.key }

// encode is a token as the fence key holds it.
func encode(t baton.Token) string { return fmt.Sprintf("%020d", uint64(t)) }

func decode(key string, b []byte) (baton.Token, error) {
	t, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil || len(b) != 20 {
		return 0, fmt.Errorf("etcdfence: fence key %s holds %q, no token", key, b)
	}
	return baton.Token(t), nil
}

// Do runs ops (puts, deletes, reads or nested transactions, as
// clientv3.OpPut and the others make them) in one transaction with the
// fence check, if token is at least the highest token of the fence, and
// records the token there; it returns the operations' responses, in order.
// A stale token gets a *fence.StaleError and runs nothing. The operations
// must not touch the fence key (etcd refuses a transaction that puts one
// key twice).
func (f *Fence) Do(ctx context.Context, token baton.Token, ops ...clientv3.Op) ([]*etcdserverpb.ResponseOp, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: etcdfence: nil context", baton.ErrInvalidArgument)
	}
	if token == 0 {
		return nil, fmt.Errorf("%w: etcdfence: token 0 is no fencing token", baton.ErrInvalidArgument)
	}
	tok := encode(token)
	els := make([]clientv3.Op, 0, 1+len(ops))
	els = append(els, clientv3.OpPut(f.key, tok))
	els = append(els, ops...)
	r, err := f.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(f.key), ">", tok)).
		Then(clientv3.OpGet(f.key)).
		Else(els...).
		Commit()
	if err != nil {
		return nil, err
	}
	if !r.Succeeded {
		return r.Responses[1:], nil
	}
	kvs := r.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) != 1 {
		return nil, fmt.Errorf("etcdfence: fence key %s: unexpected reply", f.key)
	}
	highest, err := decode(f.key, kvs[0].Value)
	if err != nil {
		return nil, err
	}
	return nil, &fence.StaleError{Token: token, Highest: highest}
}

// Put is a fenced put of value at key, with the options of clientv3.OpPut
// (a lease, for one).
func (f *Fence) Put(ctx context.Context, token baton.Token, key, value string, opts ...clientv3.OpOption) error {
	if key == "" {
		return fmt.Errorf("%w: etcdfence: empty key", baton.ErrInvalidArgument)
	}
	_, err := f.Do(ctx, token, clientv3.OpPut(key, value, opts...))
	return err
}

// Delete is a fenced delete of key (and of a range, with
// clientv3.WithPrefix or WithRange); it returns the number of keys deleted.
func (f *Fence) Delete(ctx context.Context, token baton.Token, key string, opts ...clientv3.OpOption) (int64, error) {
	if key == "" {
		return 0, fmt.Errorf("%w: etcdfence: empty key", baton.ErrInvalidArgument)
	}
	rs, err := f.Do(ctx, token, clientv3.OpDelete(key, opts...))
	if err != nil {
		return 0, err
	}
	return rs[0].GetResponseDeleteRange().GetDeleted(), nil
}

// Highest returns the highest token the fence has accepted (0 before the
// first).
func (f *Fence) Highest(ctx context.Context) (baton.Token, error) {
	if ctx == nil {
		return 0, fmt.Errorf("%w: etcdfence: nil context", baton.ErrInvalidArgument)
	}
	r, err := f.kv.Get(ctx, f.key)
	if err != nil {
		return 0, err
	}
	if len(r.Kvs) == 0 {
		return 0, nil
	}
	return decode(f.key, r.Kvs[0].Value)
}
