package redislock

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

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
	seq := 0
	b.Run("raw-lua", func(b *testing.B) {
		seq++
		key := "raw-lua-" + strconv.Itoa(seq) // each run from a new key
		var ver int64
		for b.Loop() {
			r, err := rawValueCAS.Run(ctx, c, []string{key}, ver, data).Slice()
			if err != nil || r[0].(int64) != 1 {
				b.Fatal(r, err)
			}
			ver = r[1].(int64)
		}
	})
	b.Run("raw-watch", func(b *testing.B) {
		for b.Loop() {
			rawWatchCAS(b, c, "raw-watch", data)
		}
	})
	// The three in one loop, one after the other, so that the ratios hold
	// under a load that changes while the benchmark runs.
	b.Run("interleaved", func(b *testing.B) {
		v, err := benchBackend(b, s.URL("")).Value(ctx, "bench-interleaved")
		if err != nil {
			b.Fatal(err)
		}
		_, ver, err := v.Load(ctx)
		if err != nil {
			b.Fatal(err)
		}
		seq++
		key := "raw-lua-" + strconv.Itoa(seq)
		var rver int64
		var tb, tl, tw time.Duration
		for b.Loop() {
			t0 := time.Now()
			if ver, err = v.CompareAndSwap(ctx, ver, data); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			r, err := rawValueCAS.Run(ctx, c, []string{key}, rver, data).Slice()
			if err != nil || r[0].(int64) != 1 {
				b.Fatal(r, err)
			}
			rver = r[1].(int64)
			t2 := time.Now()
			rawWatchCAS(b, c, "raw-watch", data)
			tb, tl, tw = tb+t1.Sub(t0), tl+t2.Sub(t1), tw+time.Since(t2)
		}
		n := float64(b.N)
		b.ReportMetric(float64(tb.Microseconds())/n, "baton-µs")
		b.ReportMetric(float64(tl.Microseconds())/n, "raw-lua-µs")
		b.ReportMetric(float64(tw.Microseconds())/n, "raw-watch-µs")
		b.ReportMetric(float64(tb)/float64(tl), "ratio-lua")
		b.ReportMetric(float64(tb)/float64(tw), "ratio-watch")
	})
}

// rawWatchCAS is the optimistic transaction of the baseline: WATCH, HGET,
// MULTI, HSET, EXEC.
func rawWatchCAS(b *testing.B, c *redis.Client, key string, data []byte) {
	ctx := context.Background()
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

// A Wait whose subscription could not be sent (the server is down) fails;
// once the server is back, Waits subscribe and wake again.
func TestValueWaitAfterServerDown(t *testing.T) {
	ctx := context.Background()
	s := startRedis(t)
	b := open(t, s.URL(""))
	w, err := b.Value(ctx, "down")
	if err != nil {
		t.Fatal(err)
	}
	v, err := b.Value(ctx, "down")
	if err != nil {
		t.Fatal(err)
	}
	s.Kill()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, _, err = w.Wait(wctx, 0)
	cancel()
	if err == nil {
		t.Fatal("Wait with the server down succeeded")
	}
	s.Start()
	got := make(chan error, 1)
	go func() {
		for {
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, ver, err := w.Wait(wctx, 0)
			cancel()
			if err == nil && ver == 0 {
				err = errors.New("Wait returned version 0")
			}
			if err == nil || errors.Is(err, context.DeadlineExceeded) {
				got <- err
				return
			}
			time.Sleep(10 * time.Millisecond) // the pool's connections died with the server
		}
	}()
	time.Sleep(200 * time.Millisecond)
	for {
		if _, err := v.CompareAndSwap(ctx, 0, []byte("x")); err == nil || errors.Is(err, baton.ErrConflict) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := <-got; err != nil {
		t.Fatalf("Wait after the server came back: %v", err)
	}
}
