package baton

import (
	"context"
	"log/slog"
)

// LogObserver returns an Observer that logs every event to l (slog.Default
// when nil) at the level an operator would filter on:
//
//   - Warn: a hold lost (EventLost); an error that is a misuse of the API
//     (classes invalid, not_held, upgrade).
//   - Error: an error of the backend itself (classes other, mismatch,
//     unsupported).
//   - Debug: everything else: acquisitions as they start and end (with
//     the wait), releases (with the hold time), handoffs, and the errors
//     that are part of normal work (locked, canceled, deadline, closed,
//     not_found, and lost, which EventLost reports).
//
// Lease renewals happen in the lease backends, which log them to the
// logger of lease.WithLogger: failures at Warn, successes at Debug.
func LogObserver(l *slog.Logger) Observer {
	if l == nil {
		l = slog.Default()
	}
	return logObserver{l}
}

type logObserver struct{ l *slog.Logger }

func (o logObserver) Observe(e Event) {
	level := slog.LevelDebug
	switch e.Type {
	case EventLost:
		level = slog.LevelWarn
	case EventError:
		switch ErrorClass(e.Err) {
		case "invalid", "not_held", "upgrade":
			level = slog.LevelWarn
		case "other", "mismatch", "unsupported":
			level = slog.LevelError
		}
	}
	ctx := context.Background()
	if !o.l.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs, slog.String("backend", e.Backend))
	if e.Kind != "" {
		attrs = append(attrs, slog.String("kind", string(e.Kind)), slog.String("name", e.Name))
	}
	attrs = append(attrs, slog.String("op", e.Op))
	switch e.Type {
	case EventAcquired:
		attrs = append(attrs, slog.Duration("wait", e.Wait), slog.Uint64("token", uint64(e.Token)))
	case EventFailed:
		attrs = append(attrs, slog.Duration("wait", e.Wait))
	case EventReleased:
		attrs = append(attrs, slog.Duration("held", e.Held))
	}
	if e.N > 0 {
		attrs = append(attrs, slog.Int64("n", e.N))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("class", ErrorClass(e.Err)), slog.Any("err", e.Err))
	}
	o.l.LogAttrs(ctx, level, "baton: "+e.Type.String(), attrs...)
}
