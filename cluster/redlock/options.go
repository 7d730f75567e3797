package redlock

import (
	"embed"
	"fmt"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/redis/go-redis/v9"
)

// DefaultPrefix is the default key prefix, that of every Redis backend:
// the baton command's status, ls and rm see the locks of all of them.
const DefaultPrefix = redisnode.DefaultPrefix

// DefaultNodeTimeout is the default time a request waits for one node.
const DefaultNodeTimeout = 50 * time.Millisecond

var nodeTimeoutKey = lease.NewKey[time.Duration]("redlock node timeout")

// WithNodeTimeout sets how long a request waits for one node. Default
// DefaultNodeTimeout, or a tenth of the TTL if that is less; it must be
// positive and at most a tenth of the TTL, so that a paused node cannot take
// the time of a lease. Other backends refuse it.
func WithNodeTimeout(d time.Duration) lease.Option {
	if d <= 0 {
		return lease.Refuse(fmt.Errorf("%w: redlock node timeout %v: must be > 0", baton.ErrInvalidArgument, d))
	}
	return nodeTimeoutKey.Option(d)
}

type options struct {
	lease.Config
	nodeTimeout time.Duration
}

func buildOptions(opts []lease.Option) (options, error) {
	c, err := redisnode.Config(opts, nodeTimeoutKey)
	if err != nil {
		return options{}, err
	}
	o := options{Config: c, nodeTimeout: min(DefaultNodeTimeout, c.TTL/10)}
	if d, ok := nodeTimeoutKey.Get(&c); ok {
		o.nodeTimeout = d
	}
	if o.nodeTimeout > c.TTL/10 {
		return options{}, fmt.Errorf("%w: redlock node timeout %v, must be at most TTL/10 = %v", baton.ErrInvalidArgument, o.nodeTimeout, c.TTL/10)
	}
	return o, nil
}

var errClosed = fmt.Errorf("redlock: %w", baton.ErrClosed)

// keyKind is the kind part of every key (redisnode.KeyBase).
const keyKind = "redlock"

//go:embed scripts/*.lua
var scriptFS embed.FS

func loadScript(name string) *redis.Script { return redisnode.Script(scriptFS, name) }

// The scripts run as they are written, one per operation.
var (
	scriptAcquire = loadScript("acquire")
	scriptExtend  = loadScript("extend")
	scriptRaise   = loadScript("raise")
	scriptRelease = loadScript("release")
	scriptInspect = loadScript("inspect")
)
