package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/batonlock/baton/cluster/redislock"
)

// noticeHandler shows the records the user must see whatever -v says, as
// baton's own lines on stderr: a Redis server's restart-safety wait
// (redislock.ErrRestartWait), which would otherwise look like a busy lock.
// Every other record goes to next.
type noticeHandler struct{ next slog.Handler }

func (h noticeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.next.Enabled(ctx, l)
}

func (h noticeHandler) Handle(ctx context.Context, r slog.Record) error {
	notice := false
	r.Attrs(func(a slog.Attr) bool {
		err, ok := a.Value.Any().(error)
		notice = ok && errors.Is(err, redislock.ErrRestartWait)
		return !notice
	})
	if notice {
		_, err := fmt.Fprintln(os.Stderr, "baton: "+strings.TrimPrefix(r.Message, "baton: "))
		return err
	}
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h noticeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return noticeHandler{h.next.WithAttrs(as)}
}

func (h noticeHandler) WithGroup(name string) slog.Handler {
	return noticeHandler{h.next.WithGroup(name)}
}
