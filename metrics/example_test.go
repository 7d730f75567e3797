package metrics_test

import (
	"log"
	"log/slog"
	"net/http"
	"strings"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
	"github.com/batonlock/baton/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// A program exports the metrics of its locks and logs their losses: one
// Observer made of the Collector and a LogObserver, attached to its
// Backend.
func Example() {
	b, err := local.Open("")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	// Locks named per job ("jobs/1234"): one series per prefix.
	c := metrics.New(metrics.WithNameLabel(func(name string) string {
		prefix, _, _ := strings.Cut(name, "/")
		return prefix
	}))
	prometheus.MustRegister(c)
	if err := baton.Observe(b, baton.Observers(c, baton.LogObserver(slog.Default()))); err != nil {
		log.Fatal(err)
	}
	http.Handle("/metrics", promhttp.Handler())
	// ... go http.ListenAndServe(addr, nil), and use b's locks.
}
