// Package redisfence makes fenced writes to Redis: a write that carries a
// baton fencing token and that Redis refuses when the token is lower than
// the highest one accepted before for the same fence key. A holder paused
// or partitioned past its lease, whose lock another holder has taken and
// written under since, therefore cannot overwrite the newer holder's data,
// even if it never looks at Hold.Lost.
//
// The check, the write and the advance of the fence key are one Lua
// script (fenced.lua), so nothing runs between them. The fence key keeps
// the highest token in decimal and never expires; give each resource one
// fence key, and each fence key one lock name. On Redis Cluster the fence
// key and the keys it guards must share a hash slot: put one hash tag in
// all of them ("{orders}:fence", "{orders}:total").
//
// Refusals are *fence.StaleError values: errors.Is(err, fence.ErrStale)
// and errors.Is(err, baton.ErrLost) hold. Equal tokens are accepted (one
// hold writing more than once), as by every guard of package fence.
//
// The package is apart from cluster/redislock, so that a resource in Redis
// can be fenced whatever backend the lock is on; it links go-redis.
package redisfence

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/fence"
)

//go:embed fenced.lua
var fencedSrc string

var fenced = redis.NewScript(fencedSrc)

// Fence is the highest token accepted for one resource, kept in a key of
// a Redis server. It is safe for concurrent use; every method is one
// script call (EVALSHA, and EVAL when the server does not
// have the script yet).
type Fence struct {
	c   redis.Scripter
	key string
}

// New returns the fence kept at key on c (a *redis.Client,
// *redis.ClusterClient, *redis.Ring or a pipeline). It makes no request.
func New(c redis.Scripter, key string) (*Fence, error) {
	if c == nil || key == "" {
		return nil, fmt.Errorf("%w: redisfence: nil client or empty key", baton.ErrInvalidArgument)
	}
	return &Fence{c: c, key: key}, nil
}

// Key returns the fence key.
func (f *Fence) Key() string { return f.key }

// Do runs the command cmd on key, with args after the key (cmd key
// args...), if token is at least the highest token of the fence, and then
// records the token; it returns the command's reply. A stale token gets a
// *fence.StaleError and runs nothing; a command that Redis refuses
// (WRONGTYPE, a syntax error) returns Redis's error and leaves the fence as
// it was. The command must write only key: it is the one key the script
// declares besides the fence key.
func (f *Fence) Do(ctx context.Context, token baton.Token, cmd, key string, args ...any) (any, error) {
	if ctx == nil || cmd == "" || key == "" {
		return nil, fmt.Errorf("%w: redisfence: nil context, empty command or key", baton.ErrInvalidArgument)
	}
	if token == 0 {
		return nil, fmt.Errorf("%w: redisfence: token 0 is no fencing token", baton.ErrInvalidArgument)
	}
	argv := make([]any, 0, 2+len(args))
	argv = append(argv, strconv.FormatUint(uint64(token), 10), cmd)
	argv = append(argv, args...)
	v, err := fenced.Run(ctx, f.c, []string{f.key, key}, argv...).Slice()
	if err != nil {
		return nil, err
	}
	if len(v) != 2 {
		return nil, fmt.Errorf("redisfence: unexpected reply %v", v)
	}
	if ok, _ := v[0].(int64); ok == 1 {
		return v[1], nil
	}
	s, _ := v[1].(string)
	highest, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("redisfence: unexpected highest token %q", v[1])
	}
	return nil, &fence.StaleError{Token: token, Highest: baton.Token(highest)}
}

// Set is a fenced SET key value, with PX expiration when expiration > 0.
func (f *Fence) Set(ctx context.Context, token baton.Token, key string, value any, expiration time.Duration) error {
	if expiration < 0 {
		return fmt.Errorf("%w: redisfence: negative expiration", baton.ErrInvalidArgument)
	}
	args := []any{value}
	if expiration > 0 {
		args = append(args, "PX", max(1, expiration.Milliseconds()))
	}
	_, err := f.Do(ctx, token, "SET", key, args...)
	return err
}

// HSet is a fenced HSET key field value [field value ...]; it returns the
// number of fields added.
func (f *Fence) HSet(ctx context.Context, token baton.Token, key string, fieldValues ...any) (int64, error) {
	if len(fieldValues) == 0 || len(fieldValues)%2 != 0 {
		return 0, fmt.Errorf("%w: redisfence: HSet needs field and value pairs", baton.ErrInvalidArgument)
	}
	v, err := f.Do(ctx, token, "HSET", key, fieldValues...)
	if err != nil {
		return 0, err
	}
	n, _ := v.(int64)
	return n, nil
}

// Highest returns the highest token the fence has accepted (0 before the
// first).
func (f *Fence) Highest(ctx context.Context) (baton.Token, error) {
	if ctx == nil {
		return 0, fmt.Errorf("%w: redisfence: nil context", baton.ErrInvalidArgument)
	}
	s, err := f.c.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{f.key}).Text()
	if err == redis.Nil {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	t, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("redisfence: fence key %s holds %q, no token", f.key, s)
	}
	return baton.Token(t), nil
}
