package redislock

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/batonlock/baton"
	"github.com/redis/go-redis/v9"
)

// A server restarted without persistence loses the value: Load reports it
// never written, and the next write's version is above every version given
// before, so a CompareAndSwap against a version from before the restart
// fails.
func TestValueRestartEmpty(t *testing.T) {
	ctx := context.Background()
	s := startRedis(t)
	b := open(t, s.URL(""))
	v, err := b.Value(ctx, "restart")
	if err != nil {
		t.Fatal(err)
	}
	var ver uint64
	for i := range 3 {
		if ver, err = v.CompareAndSwap(ctx, ver, []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	s.Restart()
	var data []byte
	var now uint64
	for {
		// The client's first request after the restart may meet the
		// closed connection.
		if data, now, err = v.Load(ctx); err == nil {
			break
		}
	}
	if data != nil || now != 0 {
		t.Fatalf("Load after the restart: %q, %d", data, now)
	}
	if _, err := v.CompareAndSwap(ctx, ver, []byte("stale")); !errors.Is(err, baton.ErrConflict) {
		t.Fatalf("CompareAndSwap with a version from before the restart: %v, want ErrConflict", err)
	}
	next, err := v.CompareAndSwap(ctx, 0, []byte("again"))
	if err != nil {
		t.Fatal(err)
	}
	if next <= ver {
		t.Fatalf("version %d after the restart, %d before", next, ver)
	}
}

// The raw CAS of the benchmark's baseline: the same check and write as
// value_cas.lua, without the version from the clock or the announcement.
var rawValueCAS = redis.NewScript(`
local cur = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if cur ~= tonumber(ARGV[1]) then return {0, cur} end
redis.call('HSET', KEYS[1], 'v', cur + 1, 'd', ARGV[2])
return {1, cur + 1}`)

// BenchmarkValueCAS compares one uncontended CompareAndSwap of a Value with
// a raw Lua CAS and with WATCH/GET/MULTI/SET/EXEC, done with go-redis on
// the same server: read the ratios side by side.
func BenchmarkValueCAS(b *testing.B) {
	s := startRedis(b)
	c := s.Client()
	ctx := context.Background()
	data := make([]byte, 256)
	b.Run("baton", func(b *testing.B) {
		v, err := benchBackend(b, s.URL("")).Value(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		_, ver, err := v.Load(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if ver, err = v.CompareAndSwap(ctx, ver, data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-lua", func(b *testing.B) {
		var ver int64
		for b.Loop() {
			r, err := rawValueCAS.Run(ctx, c, []string{"raw-lua"}, ver, data).Slice()
			if err != nil || r[0].(int64) != 1 {
				b.Fatal(r, err)
			}
			ver = r[1].(int64)
		}
	})
	b.Run("raw-watch", func(b *testing.B) {
		const key = "raw-watch"
		for b.Loop() {
			err := c.Watch(ctx, func(tx *redis.Tx) error {
				cur, err := tx.HGet(ctx, key, "v").Int64()
				if err != nil && !errors.Is(err, redis.Nil) {
					return err
				}
				_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.HSet(ctx, key, "v", cur+1, "d", data)
					return nil
				})
				return err
			}, key)
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
