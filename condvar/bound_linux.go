//go:build linux

package condvar

// top returns the bound: every slot in use is below it.
func (c *Cond) top() int { return min(int(c.bound.Load()&boundMask), Slots) }

// raise makes the bound cover slot i, which the caller has claimed. It
// changes the word even when the bound is high enough already, so that a
// lowering based on a scan that began before the claim fails.
func (c *Cond) raise(i int) {
	for {
		b := c.bound.Load()
		next := (b>>16+1)<<16 | uint64(max(int(b&boundMask), i+1))
		if c.bound.CompareAndSwap(b, next) {
			return
		}
	}
}

// lower brings the bound down to just above the highest slot in use, after
// a slot was freed.
func (c *Cond) lower() {
	for {
		b := c.bound.Load()
		t := min(int(b&boundMask), Slots)
		h := t
		for h > 0 && c.slot(h-1).Load() == 0 {
			h--
		}
		if h == t || c.bound.CompareAndSwap(b, (b>>16+1)<<16|uint64(h)) {
			return
		}
	}
}

// inUse counts the slots in use.
func (c *Cond) inUse() int {
	n := 0
	for i := range Slots {
		if uint32(c.slot(i).Load())&(sWaiting|sSignalled) != 0 {
			n++
		}
	}
	return n
}
