package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// baton writes one stream of messages on standard error, each line
// "baton: ...". The backends log background failures through slog (the
// ZooKeeper and etcd clients too, through the backends' adapters); the
// Redis and MySQL client libraries log through loggers of their own, which
// setLogger sends to slog, so that nothing else reaches standard error.

// setLogger sets where the backends and their client libraries log:
// nowhere, or warnings to stderr with -v.
func setLogger(verbose bool) {
	h := slog.Handler(slog.DiscardHandler)
	if verbose {
		h = &lineHandler{w: os.Stderr, mu: new(sync.Mutex), level: slog.LevelWarn}
	}
	slog.SetDefault(slog.New(noticeHandler{h}))
	redis.SetLogger(redisLogger{})
	_ = mysql.SetLogger(mysqlLogger{})
}

// redisLogger passes go-redis' messages to slog at Warn: they report
// failed dials and broken connections.
type redisLogger struct{}

func (redisLogger) Printf(ctx context.Context, format string, v ...any) {
	slog.Default().WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// mysqlLogger passes go-sql-driver's messages (broken connections) to slog
// at Warn.
type mysqlLogger struct{}

func (mysqlLogger) Print(v ...any) {
	slog.Default().Warn("mysql: " + strings.TrimSpace(fmt.Sprint(v...)))
}

// lineHandler writes records as baton's own lines: "baton: MESSAGE
// key=value ...", without time or level.
type lineHandler struct {
	w     io.Writer
	mu    *sync.Mutex // shared by the handlers derived from one
	level slog.Level
	attrs string // preformatted " key=value" of WithAttrs
	group string // prefix of the keys, "g." for WithGroup("g")
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("baton: ")
	b.WriteString(strings.TrimPrefix(r.Message, "baton: "))
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		appendAttr(&b, h.group, a)
		return true
	})
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range as {
		appendAttr(&b, h.group, a)
	}
	c := *h
	c.attrs = b.String()
	return &c
}

func (h *lineHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.group += name + "."
	return &c
}

// appendAttr writes " key=value", quoting a value that has blanks.
func appendAttr(b *strings.Builder, group string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		g := group
		if a.Key != "" {
			g += a.Key + "."
		}
		for _, x := range a.Value.Group() {
			appendAttr(b, g, x)
		}
		return
	}
	v := a.Value.String()
	if v == "" || strings.ContainsAny(v, " \t\n\"=") {
		v = strconv.Quote(v)
	}
	fmt.Fprintf(b, " %s%s=%s", group, a.Key, v)
}
