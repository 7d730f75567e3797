// Package redisnode holds what the Redis backends (redislock, redlock) share
// about a Redis node: the readiness marker that keeps a server that lost its
// data from granting again too soon, holder identity, node addresses, and the
// layout and scanning of keys.
package redisnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Ready reads the uptime of node and sets marker on it when it has run
// for ttl; otherwise it reports how much longer it must run. A node whose
// run id is one of trusted (WithRunID) is ready at once: it is the very
// process its starter saw before it gave any lease, so it cannot have
// lost one in a restart.
func Ready(ctx context.Context, node redis.Cmdable, marker string, ttl time.Duration, trusted []string) (time.Duration, error) {
	info, err := node.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	if id, ok := infoField(info, "run_id"); ok && slices.Contains(trusted, id) {
		return 0, node.Set(ctx, marker, strconv.FormatInt(time.Now().UnixMilli(), 10), 0).Err()
	}
	up, err := uptime(info)
	if err != nil {
		return 0, err
	}
	// Uptime is the difference of two wall-clock readings in whole seconds
	// (now and the start, each rounded down), so it can read up to a second
	// more than the server has run: count one second less.
	need := (ttl + time.Second - 1).Truncate(time.Second) + time.Second
	if left := need - up; left > 0 {
		return left, nil
	}
	return 0, node.Set(ctx, marker, strconv.FormatInt(time.Now().UnixMilli(), 10), 0).Err()
}

// uptime reads uptime_in_seconds from an INFO reply.
func uptime(info string) (time.Duration, error) {
	if v, ok := infoField(info, "uptime_in_seconds"); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return time.Duration(n) * time.Second, nil
		}
	}
	return 0, fmt.Errorf("INFO has no uptime_in_seconds")
}

// infoField reads the field name of an INFO reply.
func infoField(info, name string) (string, bool) {
	for l := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+":"); ok {
			return v, true
		}
	}
	return "", false
}

func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

var Meta = sync.OnceValue(func() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r == '|' || r < 0x20 {
			return '_'
		}
		return r
	}, host)
	return fmt.Sprintf("%d %s", os.Getpid(), host)
})
