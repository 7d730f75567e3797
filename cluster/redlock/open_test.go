package redlock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redistest"
)

// TestOpenChecksNodes: OpenURL asks every node once. A node down is
// tolerated while a majority answers; a majority down, or a node that
// refuses the password, fails the open, naming the nodes, with the
// password masked.
func TestOpenChecksNodes(t *testing.T) {
	ss := []*redistest.Server{redistest.Start(t), redistest.Start(t), redistest.Start(t)}
	ctx := context.Background()
	down := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	b, err := OpenURL(ctx, "redlock://"+ss[0].Addr()+","+ss[1].Addr()+","+down)
	if err != nil {
		t.Fatalf("one node of three down: %v", err)
	}
	b.Close()
	down2 := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	_, err = OpenURL(ctx, "redlock://"+ss[0].Addr()+","+down2+","+down)
	if err == nil || errors.Is(err, baton.ErrInvalidArgument) || !strings.Contains(err.Error(), down) || !strings.Contains(err.Error(), down2) {
		t.Fatalf("two nodes of three down: %v, want an error naming both", err)
	}

	pw := []*redistest.Server{redistest.New(t, "--requirepass", "s3cret"), redistest.New(t, "--requirepass", "s3cret"), redistest.New(t, "--requirepass", "s3cret")}
	for _, s := range pw {
		s.Start()
		t.Cleanup(s.Kill)
	}
	hosts := pw[0].Addr() + "," + pw[1].Addr() + "," + pw[2].Addr()
	start := time.Now()
	_, err = baton.Open(ctx, "redlock://:wr0ng@"+hosts)
	if err == nil || !strings.Contains(err.Error(), "refused the credentials") || strings.Contains(err.Error(), "wr0ng") {
		t.Fatalf("wrong password: %v, want the credentials refused, the password masked", err)
	}
	t.Logf("wrong password refused in %v: %v", time.Since(start), err)
	b, err = baton.Open(ctx, "redlock://:s3cret@"+hosts)
	if err != nil {
		t.Fatalf("right password: %v", err)
	}
	b.Close()
}
