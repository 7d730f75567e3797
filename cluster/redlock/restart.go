package redlock

import (
	"context"
	"time"

	"github.com/batonlock/baton/cluster/internal/redisnode"
)

// checkNode checks in the background whether node i, whose marker is
// missing, has run for a TTL, and sets the marker if so (restart.go). One
// check runs at a time per node, and none before the node could be ready.
func (r *rlDriver) checkNode(i int, marker string) {
	r.readyMu.Lock()
	if r.checking[i] || time.Now().Before(r.recheck[i]) {
		r.readyMu.Unlock()
		return
	}
	r.checking[i] = true
	r.readyMu.Unlock()
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), max(r.o.nodeTimeout, 100*time.Millisecond))
		defer cancel()
		left, err := redisnode.Ready(ctx, r.nodes[i], marker, r.o.TTL, r.o.Logger)
		if err != nil {
			left = maxRedlockWait
		}
		r.readyMu.Lock()
		r.checking[i] = false
		r.recheck[i] = time.Now().Add(left)
		r.readyMu.Unlock()
	}()
}
