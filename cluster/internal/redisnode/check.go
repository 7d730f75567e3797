package redisnode

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Check asks the server of c for a PING, once, so that a wrong address or
// password fails when the backend is opened, not at its first
// acquisition. The error names addrs (where c connects); timeout bounds
// the check when ctx has no sooner deadline.
func Check(ctx context.Context, c redis.UniversalClient, addrs string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("%s: %s: %w", addrs, checkWhat(err), err)
	}
	return nil
}

// checkWhat says what a failed PING tells.
func checkWhat(err error) string {
	if IsAuth(err) {
		return "the server refused the credentials"
	}
	return "no answer from the server"
}

// IsAuth reports whether err is the server's refusal of the credentials
// or of the user's rights.
func IsAuth(err error) bool {
	for _, p := range []string{"WRONGPASS", "NOAUTH", "NOPERM", "ERR AUTH", "ERR invalid password"} {
		if strings.HasPrefix(err.Error(), p) {
			return true
		}
	}
	return false
}
