package redislock

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/driver"
)

// The Backend of New implements baton.Inspector. List scans the keys under
// the prefix (on every master of a Redis Cluster); Inspect reads one name's
// keys in one transaction; Remove deletes every key of one name, its token
// counter included.

var _ baton.Inspector = (*backend)(nil)

// keyKind maps an Inspector kind onto the kind part of keys.
func keyKind(k baton.Kind) (string, error) {
	switch k {
	case baton.KindMutex:
		return kmutex, nil
	case baton.KindRWMutex:
		return krw, nil
	case baton.KindSemaphore:
		return ksem, nil
	case baton.KindCond:
		return kcond, nil
	case baton.KindQueue:
		return kjobs, nil
	}
	return "", fmt.Errorf("redislock: kind %q: want mutex, rwmutex, semaphore, cond or queue: %w", k, baton.ErrInvalidArgument)
}

func inspectKind(kk string) (baton.Kind, bool) {
	switch kk {
	case kmutex:
		return baton.KindMutex, true
	case krw:
		return baton.KindRWMutex, true
	case ksem:
		return baton.KindSemaphore, true
	case kcond:
		return baton.KindCond, true
	case kjobs:
		return baton.KindQueue, true
	}
	return "", false
}

// List returns every mutex, rwmutex, semaphore and cond that has a key
// under the prefix. An object whose keys expire between the scan and its
// inspection is left out.
func (d *backend) List(ctx context.Context) ([]baton.Info, error) {
	keys, err := redisnode.ScanKeys(ctx, d.c, redisnode.GlobEscape(d.o.Prefix)+"*")
	if err != nil {
		return nil, fmt.Errorf("redislock: list: %w", err)
	}
	return redisnode.InspectKeys(ctx, d.o.Prefix, keys, inspectKind, d.Inspect)
}

// objectKeys returns the keys of one object and the script's name for its
// kind.
func (d *backend) objectKeys(kind baton.Kind, name string) ([]string, string, error) {
	kk, err := keyKind(kind)
	if err != nil {
		return nil, "", err
	}
	switch kind {
	case baton.KindSemaphore:
		return semKeys(d.o.Prefix, name), "sem", nil
	case baton.KindCond:
		return condKeys(d.o.Prefix, name), "cond", nil
	case baton.KindMutex:
		return mutexKeys(d.o.Prefix, name), "mutex", nil
	case baton.KindQueue:
		return nameKeys(redisnode.KeyBase(d.o.Prefix, kjobs, name), jobsSuffixes), "", nil
	}
	return lockKeys(d.o.Prefix, kk, name), "lock", nil
}

// Inspect reads one object in one script: holders with a live lease (pid,
// host, start, token, lease time left), waiters with a live queue entry, the
// capacity of a semaphore and the last token of a lock. It returns an error
// matching fs.ErrNotExist when the object has no key.
func (d *backend) Inspect(ctx context.Context, kind baton.Kind, name string) (baton.Info, error) {
	if kind == baton.KindQueue {
		return d.inspectQueue(ctx, name) // jobs_inspect.go
	}
	keys, what, err := d.objectKeys(kind, name)
	if err != nil {
		return baton.Info{}, err
	}
	v, err := scriptInspect.Run(ctx, d.c, keys, what).Slice()
	if err != nil {
		return baton.Info{}, fmt.Errorf("redislock: inspect %s %q: %w", kind, name, err)
	}
	if len(v) == 0 || v[0] != int64(1) {
		return baton.Info{}, fmt.Errorf("redislock: %s %q: %w", kind, name, fs.ErrNotExist)
	}
	if len(v) < 4 || len(v)%2 != 0 {
		return baton.Info{}, fmt.Errorf("redislock: inspect %s %q: unexpected reply %v", kind, name, v)
	}
	now := toInt(v[1])
	in := baton.Info{Name: name, Kind: kind, Backend: d.Kind(), Impl: "lua", Holders: []baton.Holder{},
		Waiters: int(toInt(v[2])), Detail: keys[0][:strings.LastIndexByte(keys[0], ':')+1]}
	if s, _ := v[3].(string); s != "" {
		n, _ := strconv.ParseInt(s, 10, 64)
		if kind == baton.KindSemaphore {
			in.Capacity = n
		} else {
			in.LastToken = baton.Token(n)
		}
	}
	for i := 4; i+1 < len(v); i += 2 {
		h := baton.Holder{TTL: time.Duration(toInt(v[i])-now) * time.Millisecond}
		s, _ := v[i+1].(string)
		parseHoldInfo(kind, s, &h)
		in.Holders = append(in.Holders, h)
	}
	slices.SortFunc(in.Holders, func(x, y baton.Holder) int { return x.Since.Compare(y.Since) })
	return in, nil
}

// toInt reads an integer reply, or an integer sent as a string.
func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		f, _ := strconv.ParseFloat(x, 64)
		return int64(f)
	}
	return 0
}

// parseHoldInfo reads a holder's info field: "mode|token|since ms|pid host"
// for locks, "n|since ms|pid host" for semaphores.
func parseHoldInfo(kind baton.Kind, s string, h *baton.Holder) {
	var since, meta string
	if kind == baton.KindSemaphore {
		f := strings.SplitN(s, "|", 3)
		if len(f) != 3 {
			return
		}
		h.N, _ = strconv.ParseInt(f[0], 10, 64)
		since, meta = f[1], f[2]
	} else {
		f := strings.SplitN(s, "|", 4)
		if len(f) != 4 {
			return
		}
		h.Mode = driver.Exclusive.String()
		if f[0] == "r" {
			h.Mode = driver.Shared.String()
		}
		t, _ := strconv.ParseUint(f[1], 10, 64)
		h.Token = baton.Token(t)
		since, meta = f[2], f[3]
	}
	if ms, err := strconv.ParseInt(since, 10, 64); err == nil {
		h.Since = time.UnixMilli(ms)
	}
	redisnode.ParseMeta(meta, h)
}

// Remove deletes every key of the object, its token counter (or capacity)
// included: holders find their hold gone at their next renewal, and their
// Unlock returns baton.ErrLost; waiters queue again at their next check-in.
// A later acquisition draws its token from a counter that starts again at
// the server clock in microseconds, above the earlier tokens unless they
// were drawn faster than one per microsecond. It returns an error matching
// fs.ErrNotExist when the object had no key.
func (d *backend) Remove(ctx context.Context, kind baton.Kind, name string) error {
	keys, _, err := d.objectKeys(kind, name)
	if err != nil {
		return err
	}
	n, err := d.c.Del(ctx, keys...).Result()
	if err != nil {
		return fmt.Errorf("redislock: remove %s %q: %w", kind, name, err)
	}
	if n == 0 {
		return fmt.Errorf("redislock: %s %q: %w", kind, name, fs.ErrNotExist)
	}
	return nil
}
