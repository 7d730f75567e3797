package locktest

import (
	"context"
	"errors"
	"testing"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// ForeignGrant hands a driver of every lock kind of d a grant it did not
// return (another driver's, and an empty one) and checks the one answer
// the contract gives: driver.ErrForeignGrant, before any side effect, and
// no panic; a Passer refuses to pass it. name is a fresh name.
func ForeignGrant(t *testing.T, d driver.Backend, name string) {
	t.Helper()
	ctx := context.Background()
	type other struct{}
	foreign := []driver.Grant{{Token: 1, Data: &other{}}, {}}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, driver.ErrForeignGrant) {
			t.Errorf("%s of a foreign grant: %v, want driver.ErrForeignGrant", what, err)
		}
	}
	m, err := d.OpenMutex(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// A backend may lack RWMutex or Semaphore.
	rw, err := d.OpenRWMutex(ctx, name+"-rw")
	if err != nil && !errors.Is(err, baton.ErrUnsupported) {
		t.Fatal(err)
	}
	s, serr := d.OpenSemaphore(ctx, name+"-sem", 2)
	if serr != nil && !errors.Is(serr, baton.ErrUnsupported) {
		t.Fatal(serr)
	}
	for _, g := range foreign {
		check("Mutex Release", m.Release(ctx, g))
		if rw != nil {
			check("RWMutex Release", rw.Release(ctx, g))
			_, err := rw.Downgrade(ctx, g)
			check("RWMutex Downgrade", err)
		}
		if s != nil {
			g.N = 1
			check("Semaphore Release", s.Release(ctx, g, 1))
		}
		if p, ok := m.(driver.Passer); ok {
			if _, passed := p.Pass(g); passed {
				t.Error("Pass of a foreign grant accepted")
			}
		}
	}
	if rw != nil {
		rw.Close()
	}
	if s != nil {
		s.Close()
	}
	// The drivers still serve their own grants.
	g, err := m.TryAcquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Release(ctx, g); err != nil {
		t.Fatalf("Release of its own grant after foreign ones: %v", err)
	}
}
