package recipe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/batonlock/baton"
)

// MaxMembers is the largest member count of a DoubleBarrier.
const MaxMembers = 1024

// DoubleBarrier lets n members enter together and leave together: Enter
// returns once n members have entered the round, Leave once every member
// of the round has left it. Members are goroutines, processes or machines
// that open the name on one Backend.
//
// Membership is a hold: a member holds the Mutex of a slot (one of n per
// round) from Enter to Leave, and the round's state (its number, whether
// it is full, which slots are in it) is one Value. A member that dies
// gives its slot back as any hold is given back when its holder dies (at
// once on the same host, when the lease runs out on a lease backend), and
// that is what the others wait for: Leave waits, slot by slot, until it
// can take each other member's slot, which a member that left or died
// gives up, so a dead member cannot keep the others waiting beyond its
// lease. While the round fills, every member waiting in Enter also waits
// on the slots of the others, and takes out of the round a member whose
// slot comes free (it died or gave up), so that the round opens with n
// members alive. Nothing polls where the backend notifies: the waits are
// on Mutexes and on the Value; only an Enter that finds every free slot
// busy for an instant (taken by a member on its way in or by a watcher)
// looks again after at most 20 ms.
//
// A member that arrives while a round is full waits until that round's
// members have all left, then enters the next one. Rounds alternate
// between two sets of slots; a member that stalls in Leave for a whole
// later round may wait for that round's members too.
type DoubleBarrier struct {
	b    baton.Backend
	name string
	n    int
	v    baton.Value
}

// NewDoubleBarrier opens the double barrier of name on b for rounds of n
// members (1 to MaxMembers). Every member must give the same n.
func NewDoubleBarrier(ctx context.Context, b baton.Backend, name string, n int) (*DoubleBarrier, error) {
	if n < 1 || n > MaxMembers {
		return nil, fmt.Errorf("recipe: double barrier %q: %d members: %w", name, n, baton.ErrInvalidArgument)
	}
	d := &DoubleBarrier{b: b, name: name, n: n}
	// The longest slot name must be valid too, or Enter would fail later.
	if err := baton.ValidateName(d.slotName(1, n-1)); err != nil {
		return nil, fmt.Errorf("recipe: double barrier %q: its slot names: %w", name, err)
	}
	v, err := b.Value(ctx, name)
	if err != nil {
		return nil, err
	}
	d.v = v
	return d, nil
}

// Close closes the barrier's Value handle. Members keep their slots until
// they Leave.
func (d *DoubleBarrier) Close() error { return d.v.Close() }

// Member is one member's place in a round.
type Member struct {
	d       *DoubleBarrier
	gen     uint64
	slot    int
	m       baton.Mutex
	hold    baton.Hold
	members []int // the round's slots once it is full
}

// Err returns nil while the member's slot is held, and an error matching
// baton.ErrLost once it is lost (the others may then count it as gone).
func (m *Member) Err() error { return m.hold.Err() }

// Lost returns a channel closed when the member's slot is lost.
func (m *Member) Lost() <-chan struct{} { return m.hold.Lost() }

// Enter waits until n members (this one included) are in the round, or
// ctx ends: then it takes this member out of the round again and returns
// the context's error, or, if the round filled in that instant, leaves it
// at once (the others see it leave).
func (d *DoubleBarrier) Enter(ctx context.Context) (*Member, error) {
	for {
		data, ver, err := d.v.Load(ctx)
		if err != nil {
			return nil, err
		}
		st := decodeRound(data)
		if st.open {
			if err := d.drain(ctx, st.gen, st.members, -1); err != nil {
				return nil, err
			}
			if err := d.reset(ctx, st.gen); err != nil {
				return nil, err
			}
			continue
		}
		mb, err := d.takeSlot(ctx, st)
		if err != nil {
			return nil, err
		}
		if mb == nil { // every slot is busy for a moment
			wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			_, _, err = d.v.Wait(wctx, ver)
			cancel()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		next := round{gen: st.gen, members: append(slices.Clone(st.members), mb.slot)}
		next.open = len(next.members) >= d.n
		nver, err := d.v.CompareAndSwap(ctx, ver, next.encode())
		if err != nil {
			mb.giveBack()
			if errors.Is(err, baton.ErrConflict) {
				continue
			}
			return nil, err
		}
		if next.open {
			mb.members = next.members
			return mb, nil
		}
		return d.await(ctx, mb, nver, next)
	}
}

func (d *DoubleBarrier) slotName(gen uint64, k int) string {
	return fmt.Sprintf("%s/slot/%d/%d", d.name, gen%2, k)
}

// takeSlot takes a free slot of the round st; nil when none is free now.
func (d *DoubleBarrier) takeSlot(ctx context.Context, st round) (*Member, error) {
	for k := range d.n {
		if slices.Contains(st.members, k) {
			continue
		}
		m, err := d.b.Mutex(ctx, d.slotName(st.gen, k))
		if err != nil {
			return nil, err
		}
		h, err := m.TryLock(ctx)
		if err == nil {
			return &Member{d: d, gen: st.gen, slot: k, m: m, hold: h}, nil
		}
		_ = m.Close()
		if !errors.Is(err, baton.ErrLocked) {
			return nil, err
		}
	}
	return nil, nil
}

// giveBack releases the member's slot and closes its handle.
func (m *Member) giveBack() error {
	return errors.Join(m.m.Unlock(context.Background()), m.m.Close())
}

// await waits until the round of mb is full, watching the slots of the
// others meanwhile.
func (d *DoubleBarrier) await(ctx context.Context, mb *Member, ver uint64, st round) (*Member, error) {
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	watched := map[int]bool{mb.slot: true}
	for {
		for _, k := range st.members {
			if !watched[k] {
				watched[k] = true
				wg.Go(func() { d.watch(wctx, mb.gen, k) })
			}
		}
		data, nver, err := d.v.Wait(ctx, ver)
		if err != nil {
			return nil, errors.Join(err, d.withdraw(mb))
		}
		ver, st = nver, decodeRound(data)
		if st.gen != mb.gen || !slices.Contains(st.members, mb.slot) {
			return nil, errors.Join(fmt.Errorf("recipe: double barrier %q: round %d went on without this member: %w", d.name, mb.gen, baton.ErrLost), mb.giveBack())
		}
		if st.open {
			mb.members = st.members
			return mb, nil
		}
	}
}

// watch waits until it can take slot k of round gen (its member died or
// gave up) and takes the slot out of the round while it is filling.
func (d *DoubleBarrier) watch(ctx context.Context, gen uint64, k int) {
	m, err := d.b.Mutex(ctx, d.slotName(gen, k))
	if err != nil {
		return
	}
	defer m.Close()
	if _, err := m.Lock(ctx); err != nil {
		return
	}
	defer m.Unlock(context.WithoutCancel(ctx))
	_ = d.update(ctx, gen, func(st *round) bool {
		if st.open || !slices.Contains(st.members, k) {
			return false
		}
		st.members = slices.DeleteFunc(st.members, func(s int) bool { return s == k })
		return true
	})
}

// withdraw takes mb out of its round after its Enter failed; if the round
// opened meanwhile, mb counts as entered and leaves at once.
func (d *DoubleBarrier) withdraw(mb *Member) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := d.update(ctx, mb.gen, func(st *round) bool {
		if st.open || !slices.Contains(st.members, mb.slot) {
			return false
		}
		st.members = slices.DeleteFunc(st.members, func(s int) bool { return s == mb.slot })
		return true
	})
	return errors.Join(err, mb.giveBack())
}

// update applies f to the state of round gen until its write succeeds; it
// does nothing once the round is over or f declines.
func (d *DoubleBarrier) update(ctx context.Context, gen uint64, f func(*round) bool) error {
	_, err := swapValue(ctx, d.v, func(data []byte) ([]byte, error) {
		st := decodeRound(data)
		if st.gen != gen || !f(&st) {
			return nil, nil
		}
		return st.encode(), nil
	})
	return err
}

// Leave gives up the member's slot and waits until every other member of
// the round has left (or died), or ctx ends; the round is then over and
// the next one can fill.
func (m *Member) Leave(ctx context.Context) error {
	if err := m.giveBack(); err != nil && !errors.Is(err, baton.ErrLost) {
		return err
	}
	if err := m.d.drain(ctx, m.gen, m.members, m.slot); err != nil {
		return err
	}
	return m.d.reset(ctx, m.gen)
}

// drain waits until it can take each slot of members (but skip) of round
// gen, one after the other, giving each back at once.
func (d *DoubleBarrier) drain(ctx context.Context, gen uint64, members []int, skip int) error {
	for _, k := range members {
		if k == skip {
			continue
		}
		m, err := d.b.Mutex(ctx, d.slotName(gen, k))
		if err != nil {
			return err
		}
		_, err = m.Lock(ctx)
		if err == nil {
			err = m.Unlock(ctx)
		}
		if err = errors.Join(err, m.Close()); err != nil {
			return err
		}
	}
	return nil
}

// reset starts round gen+1 if round gen is still the current one.
func (d *DoubleBarrier) reset(ctx context.Context, gen uint64) error {
	return d.update(ctx, gen, func(st *round) bool {
		*st = round{gen: gen + 1}
		return true
	})
}

// round is the Value of a double barrier.
type round struct {
	gen     uint64
	open    bool  // full: its members have entered
	members []int // slots
}

func (r round) encode() []byte {
	b := binary.BigEndian.AppendUint64(nil, r.gen)
	if r.open {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	for _, k := range r.members {
		b = binary.BigEndian.AppendUint16(b, uint16(k))
	}
	return b
}

// decodeRound reads a round; anything else reads as round 0, empty.
func decodeRound(b []byte) round {
	if len(b) < 9 || (len(b)-9)%2 != 0 {
		return round{}
	}
	r := round{gen: binary.BigEndian.Uint64(b), open: b[8] == 1}
	for i := 9; i < len(b); i += 2 {
		r.members = append(r.members, int(binary.BigEndian.Uint16(b[i:])))
	}
	return r
}
