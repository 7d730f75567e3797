package zklock

import (
	"context"

	"github.com/batonlock/baton"
)

// The schemes of OpenURL are opened by baton.Open in every program that
// imports the package.
func init() {
	baton.Register("zk", openURL)
	baton.Register("zks", openURL)
}

func openURL(ctx context.Context, rawURL string) (baton.Backend, error) { return OpenURL(ctx, rawURL) }
