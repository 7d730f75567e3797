package recipetest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/recipe"
)

func (e *env) doubleBarrier(t testing.TB, b baton.Backend, name string, n int) *recipe.DoubleBarrier {
	t.Helper()
	d, err := recipe.NewDoubleBarrier(bg(), b, name, n)
	return closeAtEnd(t, "NewDoubleBarrier", d, err)
}

// n members go through rounds: none returns from Enter before all n
// called it, none returns from Leave before all n called it.
func testDoubleRounds(t *testing.T, e *env) {
	const n, rounds = 3, 8
	name := e.name(t)
	bs := []baton.Backend{e.open(t), e.open(t)}
	var entering, leaving [rounds]atomic.Int64
	var wg sync.WaitGroup
	for g := range n {
		d := e.doubleBarrier(t, bs[g%2], name, n)
		wg.Go(func() {
			for r := range rounds {
				entering[r].Add(1)
				m, err := d.Enter(ctx20(t))
				if err != nil {
					t.Errorf("Enter of round %d: %v", r, err)
					return
				}
				if c := entering[r].Load(); c != n {
					t.Errorf("Enter of round %d returned with %d of %d members arrived", r, c, n)
				}
				if err := m.Err(); err != nil {
					t.Errorf("member lost: %v", err)
				}
				leaving[r].Add(1)
				if err := m.Leave(ctx20(t)); err != nil {
					t.Errorf("Leave of round %d: %v", r, err)
					return
				}
				if c := leaving[r].Load(); c != n {
					t.Errorf("Leave of round %d returned with %d of %d members leaving", r, c, n)
				}
			}
		})
	}
	within(t, 60*time.Second, "rounds", wg.Wait)
}

// roleMember enters the double barrier of arg ("name n stay|leave"), says
// "entered", and then leaves and says "left", or stays until killed.
func roleMember(e *env, arg string) error {
	f := strings.Fields(arg)
	n, _ := strconv.Atoi(f[1])
	b, err := e.s.Open(e.cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	d, err := recipe.NewDoubleBarrier(bg(), b, f[0], n)
	if err != nil {
		return err
	}
	defer d.Close()
	m, err := d.Enter(bg())
	if err != nil {
		return err
	}
	fmt.Println("entered")
	if f[2] == "stay" {
		select {}
	}
	if err := m.Leave(bg()); err != nil {
		return err
	}
	fmt.Println("left")
	return nil
}

// A member SIGKILLed inside the barrier does not keep the others from
// leaving beyond the suite's Failover bound.
func testDoubleKillInside(t *testing.T, e *env) {
	name := e.name(t)
	d := e.doubleBarrier(t, e.open(t), name, 3)
	stay := e.spawn(t, "member", name+" 3 stay")
	leave := e.spawn(t, "member", name+" 3 leave")
	m, err := d.Enter(ctx20(t))
	ok(t, "Enter", err)
	stay.expect(t, "entered", 20*time.Second)
	leave.expect(t, "entered", 20*time.Second)
	t0 := time.Now()
	stay.kill()
	ok(t, "Leave with a member killed inside", m.Leave(ctx20(t)))
	took := time.Since(t0)
	leave.expect(t, "left", 20*time.Second)
	if took > e.s.Failover {
		t.Errorf("Leave took %v after a member was killed inside, bound %v", took, e.s.Failover)
	}
	t.Logf("member SIGKILL -> the others have left: %v", took)
}

// A member SIGKILLed while the round fills is taken out of it: the round
// opens with n members alive, not with the dead one counted.
func testDoubleKillFilling(t *testing.T, e *env) {
	name := e.name(t)
	d := e.doubleBarrier(t, e.open(t), name, 3)
	dead := e.spawn(t, "member", name+" 3 stay")
	entered := make(chan *recipe.Member, 1)
	go func() {
		m, err := d.Enter(ctx20(t))
		if err != nil {
			t.Errorf("Enter: %v", err)
		}
		entered <- m
	}()
	time.Sleep(100 * time.Millisecond) // both are in the round
	dead.kill()
	time.Sleep(e.s.Failover) // its slot comes free; the waiter takes it out
	second := e.spawn(t, "member", name+" 3 leave")
	select {
	case <-entered:
		t.Fatal("the round opened with a dead member counted")
	case <-time.After(300 * time.Millisecond):
	}
	third := e.spawn(t, "member", name+" 3 leave")
	var m *recipe.Member
	select {
	case m = <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the round never opened with three members alive")
	}
	if m == nil {
		t.FailNow()
	}
	second.expect(t, "entered", 20*time.Second)
	third.expect(t, "entered", 20*time.Second)
	ok(t, "Leave", m.Leave(ctx20(t)))
	second.expect(t, "left", 20*time.Second)
	third.expect(t, "left", 20*time.Second)
}

// Bad input is refused before anything is created.
func testDoubleBadInput(t *testing.T, e *env) {
	b := e.open(t)
	for _, n := range []int{0, -1, recipe.MaxMembers + 1} {
		if _, err := recipe.NewDoubleBarrier(bg(), b, e.name(t), n); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("NewDoubleBarrier with %d members: %v, want ErrInvalidArgument", n, err)
		}
	}
	base := e.name(t)
	long := base + "/" + strings.Repeat("x", baton.MaxNameLen-4-len(base)-1) // valid; its slot names are not
	if _, err := recipe.NewDoubleBarrier(bg(), b, long, 3); !errors.Is(err, baton.ErrInvalidName) {
		t.Errorf("NewDoubleBarrier whose slot names are too long: %v, want ErrInvalidName", err)
	}
}
