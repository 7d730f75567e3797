//go:build !amd64

package word

import "sync/atomic"

// storeAfter stores v at p after the stores before it (see order_amd64.go).
func storeAfter(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
