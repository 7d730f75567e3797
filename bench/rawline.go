package main

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// rawLine is the cheapest fair mutex Redis can serve: the lock is the one
// element of a list, Lock pops it with BLPOP and Unlock pushes it back,
// and the server hands a pushed element to the client that has been
// blocked longest. One command each way and no script, but no token, no
// expiry and no recovery from a holder that dies: it is what a fair
// handoff costs on this machine before any guarantee is paid for, the
// floor of the 16-client table.
type rawLine struct {
	c   *redis.Client
	key string
}

// lineInit puts the list's element in once per key: KEYS[2] marks that
// it was.
var lineInit = redis.NewScript(`if redis.call('set', KEYS[2], '1', 'NX') then redis.call('rpush', KEYS[1], 't') end
return 1`)

func openRawLine(ctx context.Context, c *redis.Client, key string) (*rawLine, error) {
	r := &rawLine{c: c, key: "rawline:" + key}
	return r, lineInit.Run(ctx, c, []string{r.key, r.key + ":init"}).Err()
}

// lock blocks in the server a few seconds at a time, so that a cancelled
// run does not leave it waiting for good.
func (r *rawLine) lock(ctx context.Context) error {
	for {
		err := r.c.BLPop(ctx, 2*time.Second, r.key).Err()
		if !errors.Is(err, redis.Nil) {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func (r *rawLine) unlock(ctx context.Context) error { return r.c.RPush(ctx, r.key, "t").Err() }
func (r *rawLine) close() error                     { return nil }
