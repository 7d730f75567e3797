package redislock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestOpenChecksServer: a wrong password or an address with no server
// fails at Open, naming the address, with the password masked, rather
// than at the first Lock; once open, opening a handle asks the server
// nothing.
func TestOpenChecksServer(t *testing.T) {
	ctx := context.Background()
	s := redistest.New(t, "--requirepass", "s3cret")
	s.Start()
	t.Cleanup(s.Kill)
	_, err := baton.Open(ctx, "redis://:wr0ng@"+s.Addr())
	if err == nil || !strings.Contains(err.Error(), s.Addr()) || !strings.Contains(err.Error(), "refused the credentials") || strings.Contains(err.Error(), "wr0ng") {
		t.Fatalf("wrong password: %v, want the credentials refused at %s, the password masked", err, s.Addr())
	}
	_, err = baton.Open(ctx, "redis://"+s.Addr())
	if err == nil || !strings.Contains(err.Error(), "refused the credentials") {
		t.Fatalf("no password: %v, want the credentials refused", err)
	}
	down := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	for _, raw := range []string{"redis://" + down, "redis+cluster://" + down, "redis+sentinel://" + down + "/master"} {
		_, err = baton.Open(ctx, raw)
		if err == nil || errors.Is(err, baton.ErrInvalidArgument) || !strings.Contains(err.Error(), down) {
			t.Fatalf("Open(%s) with no server: %v, want an error naming %s", raw, err, down)
		}
	}

	// Opening a handle asks the server nothing: INFO counts the
	// commands it processed (the INFO itself among them).
	b, err := baton.Open(ctx, "redis://:s3cret@"+s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), Password: "s3cret"})
	defer c.Close()
	before, after := processed(t, c), int64(0)
	m, err := b.Mutex(ctx, "open-check")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rw, err := b.RWMutex(ctx, "open-check-rw")
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	after = processed(t, c)
	if after-before != 1 {
		t.Fatalf("opening a Mutex and an RWMutex: %d commands, want none", after-before-1)
	}
}

// processed returns the server's count of commands processed.
func processed(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "total_commands_processed:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("INFO stats has no total_commands_processed")
	return 0
}
