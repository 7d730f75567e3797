package etcdlock

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// clientLogger returns a zap logger for the etcd client that writes to l,
// the logger of lease.WithLogger, with zap's levels mapped to slog's: the
// client's retries and failures go where the Backend's own messages go.
func clientLogger(l *slog.Logger) *zap.Logger {
	return zap.New(slogCore{h: l.Handler()})
}

// slogCore is a zapcore.Core over an slog.Handler.
type slogCore struct{ h slog.Handler }

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l < zapcore.InfoLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (c slogCore) Enabled(l zapcore.Level) bool {
	return c.h.Enabled(context.Background(), slogLevel(l))
}

func (c slogCore) With(fs []zapcore.Field) zapcore.Core {
	return slogCore{h: c.h.WithAttrs(attrsOf(fs))}
}

func (c slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c slogCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	msg := "etcd client: " + e.Message
	if e.LoggerName != "" {
		msg = "etcd client " + e.LoggerName + ": " + e.Message
	}
	r := slog.NewRecord(e.Time, slogLevel(e.Level), msg, 0)
	r.AddAttrs(attrsOf(fs)...)
	return c.h.Handle(context.Background(), r)
}

func (slogCore) Sync() error { return nil }

// attrsOf turns zap fields into slog attributes, in the order of their
// keys.
func attrsOf(fs []zapcore.Field) []slog.Attr {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fs {
		f.AddTo(enc)
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	attrs := make([]slog.Attr, 0, len(keys))
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, enc.Fields[k]))
	}
	return attrs
}
