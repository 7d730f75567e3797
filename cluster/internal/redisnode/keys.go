package redisnode

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/listing"
	"github.com/redis/go-redis/v9"
)

// EscapeName maps a name injectively onto a string without '{' or '}', so
// that it can sit inside a hash tag: '%' -> "%25", '{' -> "%7B", '}' -> "%7D".
func EscapeName(name string) string {
	if !strings.ContainsAny(name, "%{}") {
		return name
	}
	r := strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")
	return r.Replace(name)
}

func UnescapeName(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	r := strings.NewReplacer("%25", "%", "%7B", "{", "%7D", "}")
	return r.Replace(s)
}

// KeyBase returns prefix + kind + ":{" + escaped name + "}:".
func KeyBase(prefix, kind, name string) string {
	return prefix + kind + ":{" + EscapeName(name) + "}:"
}

// ParseKey splits prefix + kind + ":{" + escaped name + "}:" + suffix.
func ParseKey(prefix, key string) (kind, name string, ok bool) {
	s, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return "", "", false
	}
	kind, s, ok = strings.Cut(s, ":{")
	if !ok {
		return "", "", false
	}
	enc, _, ok := strings.Cut(s, "}:")
	if !ok || enc == "" || strings.Contains(enc, "{") {
		return "", "", false
	}
	return kind, UnescapeName(enc), true
}

// GlobEscape quotes the characters SCAN MATCH treats specially.
func GlobEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ScanKeys returns the keys of c that match pattern. On a Cluster client it
// scans every master.
func ScanKeys(ctx context.Context, c redis.UniversalClient, pattern string) ([]string, error) {
	scan := func(ctx context.Context, c redis.Cmdable) ([]string, error) {
		var out []string
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
			if err != nil {
				return nil, err
			}
			out = append(out, keys...)
			if cursor = next; cursor == 0 {
				return out, nil
			}
		}
	}
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return scan(ctx, c)
	}
	var mu sync.Mutex
	var all []string
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		keys, err := scan(ctx, m)
		mu.Lock()
		all = append(all, keys...)
		mu.Unlock()
		return err
	})
	return all, err
}

// InspectKeys inspects, once each, the objects that keys (found under
// prefix, on one node or several) belong to, and returns them sorted by
// name and kind. kind maps the kind part of a key onto the Inspector's
// kind, or refuses it; keys that are not an object's, or whose name is not
// valid, are passed over, and so are objects that inspect finds gone
// (their keys expired since the scan).
func InspectKeys(ctx context.Context, prefix string, keys []string, kind func(kk string) (baton.Kind, bool), inspect func(context.Context, baton.Kind, string) (baton.Info, error)) ([]baton.Info, error) {
	var refs []listing.Ref
	for _, k := range keys {
		kk, name, ok := ParseKey(prefix, k)
		if !ok {
			continue
		}
		if k, ok := kind(kk); ok && baton.ValidateName(name) == nil {
			refs = append(refs, listing.Ref{Kind: k, Name: name})
		}
	}
	return listing.Inspect(ctx, refs, inspect)
}

// ParseMeta reads "pid host".
func ParseMeta(s string, h *baton.Holder) {
	pid, host, _ := strings.Cut(s, " ")
	h.PID, _ = strconv.Atoi(pid)
	h.Host = host
}
