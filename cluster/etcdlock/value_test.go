package etcdlock

import (
	"context"
	"testing"

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
		const key = "raw/value"
		var rev int64
		for b.Loop() {
			resp, err := e.cl.Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
				Then(clientv3.OpPut(key, data)).
				Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).
				Commit()
			if err != nil || !resp.Succeeded {
				b.Fatal(resp, err)
			}
			rev = resp.Header.Revision
		}
	})
}
