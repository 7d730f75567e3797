package baton

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton/driver"
)

func TestValidateName(t *testing.T) {
	for _, n := range []string{"a", "a/b", "jobs/gpu-4", "é", "a.b", ".hidden", "x{y}", strings.Repeat("x", MaxNameLen)} {
		if err := ValidateName(n); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", n, err)
		}
	}
	for _, n := range []string{"", "/", "a/", "/a", "a//b", ".", "..", "a/../b", "a\x00", "\xff", "a\nb", "\x7f", "\u0085", strings.Repeat("x", MaxNameLen+1)} {
		if err := ValidateName(n); !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateName(%q) = %v, want ErrInvalidName", n, err)
		}
	}
}

func TestValidatePermits(t *testing.T) {
	for _, c := range []struct {
		n, capacity int64
		ok          bool
	}{{1, 0, true}, {3, 3, true}, {0, 0, false}, {-1, 0, false}, {4, 3, false}} {
		err := ValidatePermits(c.n, c.capacity)
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ValidatePermits(%d, %d) = %v", c.n, c.capacity, err)
		}
	}
}

func TestLoss(t *testing.T) {
	var none *driver.Loss
	if none.Done() != nil || none.Err() != nil {
		t.Error("a nil Loss must never fire")
	}
	none.Fire(errors.New("ignored"))
	l := driver.NewLoss()
	h := newHold(7, Exclusive, false, l)
	ctx, cancel := h.Context(context.Background())
	defer cancel()
	select {
	case <-h.Lost():
		t.Fatal("fired early")
	default:
	}
	cause := errors.New("lease expired")
	l.Fire(cause)
	l.Fire(errors.New("second"))
	<-h.Lost()
	if !errors.Is(h.Err(), ErrLost) || !errors.Is(h.Err(), cause) {
		t.Errorf("Err() = %v, want ErrLost wrapping the cause", h.Err())
	}
	select {
	case <-ctx.Done():
		if !errors.Is(context.Cause(ctx), ErrLost) {
			t.Errorf("cause %v", context.Cause(ctx))
		}
	case <-time.After(time.Second):
		t.Fatal("Hold.Context not cancelled by the loss")
	}
}

// TestLossDeadline: a Loss whose deadline passed reads as lost through
// Hold.Err, Hold.Lost and Hold.Context at once, with no timer having fired
// it.
func TestLossDeadline(t *testing.T) {
	l := driver.NewLoss()
	l.SetDeadline(time.Now().Add(20 * time.Millisecond))
	h := newHold(7, Exclusive, false, l)
	ctx, cancel := h.Context(context.Background())
	defer cancel()
	if h.Err() != nil || ctx.Err() != nil {
		t.Fatalf("lost before the deadline: %v, %v", h.Err(), ctx.Err())
	}
	time.Sleep(21 * time.Millisecond)
	if !errors.Is(h.Err(), ErrLost) {
		t.Errorf("Err right after the deadline: %v, want ErrLost", h.Err())
	}
	select {
	case <-h.Lost():
	default:
		t.Error("Lost not closed right after the deadline")
	}
	if ctx.Err() == nil || !errors.Is(context.Cause(ctx), ErrLost) {
		t.Errorf("Hold.Context right after the deadline: err %v, cause %v", ctx.Err(), context.Cause(ctx))
	}
	l2 := driver.NewLoss()
	l2.SetDeadline(time.Now().Add(10 * time.Millisecond))
	l2.SetDeadline(time.Time{}) // given back
	time.Sleep(11 * time.Millisecond)
	if l2.Err() != nil {
		t.Errorf("a Loss whose deadline was taken off fired: %v", l2.Err())
	}
}

func TestOwner(t *testing.T) {
	bg := context.Background()
	if OwnerOf(bg) != 0 || OwnerOf(nil) != 0 {
		t.Error("no owner expected")
	}
	a, b := WithOwner(bg), WithOwner(bg)
	if OwnerOf(a) == 0 || OwnerOf(a) == OwnerOf(b) {
		t.Error("owners must be distinct and non-zero")
	}
	child, cancel := context.WithCancel(a)
	defer cancel()
	if OwnerOf(child) != OwnerOf(a) {
		t.Error("owner must travel to derived contexts")
	}
}

func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"a", "a/b", "../x", "\x00", "é/ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := ValidateName(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("%q: %v does not match ErrInvalidName", s, err)
			}
			return
		}
		for _, seg := range strings.Split(s, "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("%q accepted with segment %q", s, seg)
			}
		}
		if strings.ContainsRune(s, 0) || len(s) > MaxNameLen {
			t.Fatalf("%q accepted", s)
		}
	})
}
