package recipecheck

import (
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redistest"
	"github.com/batonlock/baton/local"
	"github.com/batonlock/baton/recipe/recipetest"
)

// Multi-locks whose parts are on Redis, etcd and the same host at once.
func TestMultiLockAcrossBackends(t *testing.T) {
	rurl, eurl := redistest.Start(t).URL(""), startEtcd(t)
	open := func(f func() (baton.Backend, error)) baton.Backend {
		b, err := f()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	var stores []recipetest.Store
	for _, s := range []struct {
		name string
		open func() (baton.Backend, error)
	}{
		{"redis", func() (baton.Backend, error) { return openRedis(rurl) }},
		{"etcd", func() (baton.Backend, error) { return openEtcd(eurl) }},
		{"local", func() (baton.Backend, error) { return local.Open(t.TempDir()) }},
	} {
		b := open(s.open)
		stores = append(stores, recipetest.Store{Name: s.name, Backends: []baton.Backend{b, b}})
	}
	recipetest.Hammer(t, stores, "recipecheck/mixed", 3, 6, 3*time.Second)
}
