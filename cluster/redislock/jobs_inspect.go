package redislock

import (
	"context"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/internal/queuedetail"
)

var scriptJobsInspect = loadScript("jobs_inspect")

// inspectQueue reads a queue in one script: a holder per claim in flight
// (its job, token and lease left; up to 100), the last token, and the
// counts by state and the oldest ready job's age in Detail, as the
// same-host queue shows them.
func (d *backend) inspectQueue(ctx context.Context, name string) (baton.Info, error) {
	keys := nameKeys(redisnode.KeyBase(d.o.Prefix, kjobs, name), jobsSuffixes)
	v, err := scriptJobsInspect.Run(ctx, d.c, keys).Slice()
	if err != nil {
		return baton.Info{}, fmt.Errorf("redislock: inspect queue %q: %w", name, err)
	}
	if len(v) == 0 || v[0] != int64(1) {
		return baton.Info{}, fmt.Errorf("redislock: queue %q: %w", name, fs.ErrNotExist)
	}
	if len(v) < 8 || (len(v)-8)%3 != 0 {
		return baton.Info{}, fmt.Errorf("redislock: inspect queue %q: unexpected reply %v", name, v)
	}
	now := toInt(v[1])
	c := queuedetail.Counts{Ready: int(toInt(v[2])), Delayed: int(toInt(v[3])), InFlight: int(toInt(v[4])), Dead: int(toInt(v[5]))}
	if ms := toInt(v[7]); ms >= 0 {
		c.Oldest = max(time.Duration(ms)*time.Millisecond, time.Millisecond) // known, even if just now
	}
	in := baton.Info{Name: name, Kind: baton.KindQueue, Backend: d.Kind(), Impl: "lua", Holders: []baton.Holder{}, Waiters: -1,
		Detail: queuedetail.Format(c)}
	if s, _ := v[6].(string); s != "" {
		n, _ := strconv.ParseUint(s, 10, 64)
		in.LastToken = baton.Token(n)
	}
	for i := 8; i+2 < len(v); i += 3 {
		id, _ := v[i].(string)
		tok, _ := v[i+2].(string)
		t, _ := strconv.ParseUint(tok, 10, 64)
		in.Holders = append(in.Holders, baton.Holder{Mode: "exclusive", Owner: "job " + id, Token: baton.Token(t),
			TTL: time.Duration(toInt(v[i+1])-now) * time.Millisecond})
	}
	return in, nil
}
