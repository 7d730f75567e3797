package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
)

//go:embed live.html
var livePage []byte

const serveLong = `Serve the live view of the backend over HTTP, for a browser and for
Prometheus:

  /              a status page: holders and waiters of every object,
                 refreshed every second, sortable by wait, hold time or name
  /api/objects   the same as JSON (?sort=wait|held|name): the objects of
                 baton ls --json (schema 2) with the time of the listing
  /queues/requeue, /queues/purge
                 POST only, from the page itself (its form, with the
                 token made for this server instance; other origins and
                 requests without the token are refused with 403):
                 requeue or purge every dead letter of a queue
  /metrics       Prometheus metrics of the objects: baton_object_holders,
                 baton_object_waiters, baton_object_held_seconds,
                 baton_object_lease_seconds, baton_object_last_token_high
                 and _low (the token's halves, each exact), and
                 baton_inspect_up (0 when the backend cannot be listed)
                 with baton_inspect_errors_total

The page is plain HTML with a little JavaScript; it needs nothing but the
server. baton serve lists the backend at every request and holds nothing.
Ctrl-C or SIGTERM stops it.`

func newServeCmd() *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "serve --http ADDR",
		Short: "Serve a status page, its JSON and Prometheus metrics over HTTP",
		Long:  serveLong,
		Example: `  baton serve --http 127.0.0.1:7070
  BATON_BACKEND=etcd://10.0.0.5:2379 baton serve --http :7070`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if addr == "" {
				return usageErrorf("--http ADDR is required (e.g. 127.0.0.1:7070)")
			}
			return runServe(cmd, addr)
		},
	}
	cmd.Flags().StringVar(&addr, "http", "", "listen on `ADDR` (host:port)")
	return cmd
}

// liveReport is the JSON of /api/objects.
type liveReport struct {
	jsonReport
	Time  string `json:"time"` // of the listing, RFC 3339
	Sort  string `json:"sort"`
	Error string `json:"error,omitempty"` // the listing failed, in part or whole
}

func runServe(cmd *cobra.Command, addr string) error {
	return live(cmd, func(ctx context.Context, in baton.Inspector, raw string) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return usageErrorf("--http %s: %v", addr, err)
		}
		srv := &http.Server{Handler: liveHandler(in, raw, pageToken()), ReadHeaderTimeout: 10 * time.Second}
		cmd.PrintErrf("baton: serving %s on http://%s/\n", baton.RedactURL(raw), ln.Addr())
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		select {
		case err = <-done:
			return exitWith(exitBackend, err)
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	})
}

// liveHandler serves the page, its JSON, the metrics of in and the
// page's actions on dead letters, which need token.
func liveHandler(in baton.Inspector, raw, token string) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewInspector(in))
	mux := http.NewServeMux()
	page := bytes.Replace(livePage, []byte("{{token}}"), []byte(token), 1)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		// Its forms act on queues: no other site may frame it.
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "frame-ancestors 'none'")
		_, _ = w.Write(page)
	})
	mux.Handle("POST /queues/{op}", deadLettersHandler(in, token))
	mux.HandleFunc("GET /api/objects", func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Query().Get("sort")
		if key == "" {
			key = sortKeys[0]
		}
		if checkSort(key) != nil {
			http.Error(w, "sort: want "+strings.Join(sortKeys, ", "), http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), inspectTimeout)
		defer cancel()
		infos, now, err := snapshot(ctx, in, key)
		rep := liveReport{jsonReport: jsonReport{Schema: jsonSchema, Backend: baton.RedactURL(raw), Objects: []jsonObject{}},
			Time: now.UTC().Format(time.RFC3339Nano), Sort: key}
		for _, i := range infos {
			rep.Objects = append(rep.Objects, toJSON(i, now))
		}
		if err != nil {
			rep.Error = strings.TrimPrefix(err.Error(), "baton: ")
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if err != nil && len(infos) == 0 && !errors.Is(err, context.Canceled) {
			w.WriteHeader(http.StatusBadGateway)
		}
		_ = json.NewEncoder(w).Encode(rep)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}
