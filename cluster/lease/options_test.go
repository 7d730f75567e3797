package lease

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

var testKey = NewKey[time.Duration]("test timeout")

func withTestKey(d time.Duration) Option {
	if d <= 0 {
		return Refuse(invalid("test timeout %v: must be > 0", d))
	}
	return testKey.Option(d)
}

// TestOptionsRefused: every option refuses zero and negative arguments
// (zero is not "the default"), and Build refuses bad combinations, all
// with ErrInvalidArgument.
func TestOptionsRefused(t *testing.T) {
	for name, opts := range map[string][]Option{
		"ttl 0":                {WithTTL(0)},
		"ttl -1s":              {WithTTL(-time.Second)},
		"ttl below minimum":    {WithTTL(MinTTL - 1)},
		"renew 0":              {WithRenewEvery(0)},
		"renew -1ms":           {WithRenewEvery(-time.Millisecond)},
		"drift 0":              {WithDrift(0)},
		"drift -1":             {WithDrift(-1)},
		"request timeout 0":    {WithRequestTimeout(0)},
		"request timeout -1":   {WithRequestTimeout(-1)},
		"prefix empty":         {WithPrefix("")},
		"prefix long":          {WithPrefix(string(make([]byte, MaxPrefixLen+1)))},
		"prefix control":       {WithPrefix("a\nb")},
		"prefix not utf-8":     {WithPrefix("a\xffb")},
		"nil logger":           {WithLogger(nil)},
		"nil option":           {nil},
		"renew over half":      {WithTTL(time.Second), WithRenewEvery(600 * time.Millisecond)},
		"drift too large":      {WithTTL(time.Second), WithRenewEvery(400 * time.Millisecond), WithDrift(600 * time.Millisecond)},
		"drift with defaults":  {WithTTL(time.Second), WithDrift(900 * time.Millisecond)},
		"extension refused":    {withTestKey(0)},
		"extension not known":  {NewKey[int]("other").Option(1)},
		"later option refused": {WithTTL(time.Second), WithDrift(-1), WithTTL(2 * time.Second)},
	} {
		if _, err := Build(Spec{Accept: []AnyKey{testKey}}, opts); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("%s: err %v, want ErrInvalidArgument", name, err)
		}
	}
}

func TestBuildDefaults(t *testing.T) {
	c, err := Build(Spec{Prefix: "p:"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.TTL != DefaultTTL || c.RenewEvery != DefaultTTL/DefaultRenewDivisor || c.Drift != DefaultDrift(DefaultTTL) ||
		c.RequestTimeout != DefaultRequestTimeout || c.Prefix != "p:" || c.Logger != slog.Default() {
		t.Fatalf("defaults: %+v", c)
	}
	if DefaultDrift(time.Second) != 12*time.Millisecond {
		t.Fatalf("DefaultDrift(1s) = %v, want 1%% + 2ms", DefaultDrift(time.Second))
	}
	if _, ok := testKey.Get(&c); ok {
		t.Fatal("an extension not given reads as set")
	}
}

func TestBuildSet(t *testing.T) {
	l := slog.New(slog.DiscardHandler)
	c, err := Build(Spec{Prefix: "p:", Accept: []AnyKey{testKey}}, []Option{
		WithTTL(3 * time.Second), WithRenewEvery(time.Second), WithDrift(5 * time.Millisecond),
		WithRequestTimeout(time.Second), WithPrefix("q/"), WithLogger(l),
		withTestKey(time.Minute), withTestKey(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.TTL != 3*time.Second || c.RenewEvery != time.Second || c.Drift != 5*time.Millisecond ||
		c.RequestTimeout != time.Second || c.Prefix != "q/" || c.Logger != l {
		t.Fatalf("options not applied: %+v", c)
	}
	if v, ok := testKey.Get(&c); !ok || v != time.Hour {
		t.Fatalf("extension: %v %v, want the last value set", v, ok)
	}
	if got := c.Deadline(time.Unix(100, 0)); !got.Equal(time.Unix(100, 0).Add(3*time.Second - 5*time.Millisecond)) {
		t.Fatalf("Deadline: %v", got)
	}
}

func TestFromQuery(t *testing.T) {
	q, _ := url.ParseQuery("ttl=3s&renew_every=1s&drift=5ms&request_timeout=2s&prefix=x:&db=2&node_timeout=20ms")
	opts, err := FromQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	d, ok, err := QueryDuration(q, "node_timeout")
	if err != nil || !ok || d != 20*time.Millisecond {
		t.Fatalf("QueryDuration: %v %v %v", d, ok, err)
	}
	if len(q) != 1 || q.Get("db") != "2" {
		t.Fatalf("left in the query: %v, want only db", q)
	}
	c, err := Build(Spec{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if c.TTL != 3*time.Second || c.RenewEvery != time.Second || c.Drift != 5*time.Millisecond ||
		c.RequestTimeout != 2*time.Second || c.Prefix != "x:" {
		t.Fatalf("query not applied: %+v", c)
	}
	for _, raw := range []string{"ttl=5", "ttl=abc", "ttl=1s&ttl=2s", "prefix=a&prefix=b", "ttl=0s", "drift=-1ms", "prefix="} {
		q, _ := url.ParseQuery(raw)
		opts, err := FromQuery(q)
		if err == nil {
			_, err = Build(Spec{}, opts)
		}
		if !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("%q: err %v, want ErrInvalidArgument", raw, err)
		}
	}
}

// TestKeeperRequestTimeout: a renewal that hangs is given the request
// timeout, not the whole lease.
func TestKeeperRequestTimeout(t *testing.T) {
	c := build(t, WithTTL(2*time.Second), WithRenewEvery(20*time.Millisecond), WithRequestTimeout(30*time.Millisecond))
	got := make(chan time.Duration, 1)
	k := StartKeeper(time.Now(), c, func(ctx context.Context) (time.Time, error) {
		dl, _ := ctx.Deadline()
		select {
		case got <- time.Until(dl):
		default:
		}
		return time.Now(), nil
	}, driver.NewLoss(), "x")
	defer k.Stop()
	select {
	case d := <-got:
		if d > 30*time.Millisecond {
			t.Fatalf("renewal given %v, want at most the request timeout", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no renewal")
	}
}
