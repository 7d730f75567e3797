package redislock

import (
	"context"

	"github.com/batonlock/baton"
)

// The schemes of OpenURL are opened by baton.Open in every program that
// imports the package.
func init() {
	baton.Register("redis", openURL)
	baton.Register("rediss", openURL)
	baton.Register("redis+cluster", openURL)
	baton.Register("rediss+cluster", openURL)
	baton.Register("redis+sentinel", openURL)
	baton.Register("rediss+sentinel", openURL)
}

func openURL(ctx context.Context, rawURL string) (baton.Backend, error) { return OpenURL(ctx, rawURL) }
