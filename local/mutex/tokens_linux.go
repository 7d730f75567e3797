//go:build linux

package mutex

import (
	"sync/atomic"

	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/internal/word"
)

// granted completes an acquisition that wrote state s: its token is the
// base plus the token bits of s plus one (see word.TokenBits), the base
// read after the compare-and-swap.
func (m *Mutex) granted(s uint64, recovered bool) driver.Grant {
	t := word.TokenOf(atomic.LoadUint64(m.fence()), s)
	m.tok = t
	return driver.Grant{Token: t, Recovered: recovered, Loss: m.loss}
}

// next returns the token bits that follow those of the hold in s (a
// dead owner's, taken over, or this handle's, given back).
func (m *Mutex) next(s uint64) uint64 { return word.Next(m.fence(), s) }
