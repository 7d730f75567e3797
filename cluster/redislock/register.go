package redislock

import "github.com/batonlock/baton/cluster/lease"

// The schemes of OpenURL are opened by baton.Open in every program that
// imports the package.
func init() {
	lease.Register(OpenURL, "redis", "rediss", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel")
}
