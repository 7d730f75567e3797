package etcdlock

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// BenchmarkValueCAS compares one uncontended CompareAndSwap of a Value with
// the raw clientv3 Txn it amounts to (compare the mod revision, put), on
// the same embedded single-member server: read the ratio side by side.
func BenchmarkValueCAS(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	data := string(make([]byte, 256))
	b.Run("baton", func(b *testing.B) {
		v, err := e.be.Value(ctx, e.name())
		if err != nil {
			b.Fatal(err)
		}
		_, ver, err := v.Load(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if ver, err = v.CompareAndSwap(ctx, ver, []byte(data)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-txn", func(b *testing.B) {
		key := "raw/" + e.name() // each run from a new key
		var rev int64
		for b.Loop() {
			rev = rawTxn(b, e.cl, key, rev, data)
		}
	})
	// Both in one loop, one after the other, so that the ratio holds
	// under a load that changes while the benchmark runs.
	b.Run("interleaved", func(b *testing.B) {
		v, err := e.be.Value(ctx, e.name())
		if err != nil {
			b.Fatal(err)
		}
		key := "raw/" + e.name()
		var ver uint64
		var rev int64
		var tb, tr time.Duration
		for b.Loop() {
			t0 := time.Now()
			if ver, err = v.CompareAndSwap(ctx, ver, []byte(data)); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			rev = rawTxn(b, e.cl, key, rev, data)
			tb, tr = tb+t1.Sub(t0), tr+time.Since(t1)
		}
		b.ReportMetric(float64(tb.Microseconds())/float64(b.N), "baton-µs")
		b.ReportMetric(float64(tr.Microseconds())/float64(b.N), "raw-txn-µs")
		b.ReportMetric(float64(tb)/float64(tr), "ratio")
	})
}

// rawTxn is the CAS of the baseline: compare the mod revision, put.
func rawTxn(b *testing.B, cl *clientv3.Client, key string, rev int64, data string) int64 {
	resp, err := cl.Txn(context.Background()).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, data)).
		Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).
		Commit()
	if err != nil || !resp.Succeeded {
		b.Fatal(resp, err)
	}
	return resp.Header.Revision
}
