package etcdlock

import (
	"encoding/json"
	"testing"
	"time"
)

// The hand-built holder value must be byte for byte what json.Marshal
// writes: inspectors and older versions parse it.
func TestHolderValue(t *testing.T) {
	times := []time.Time{
		time.Date(2026, 12, 7, 1, 2, 3, 456789000, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	for _, pid := range []int{0, 4242} {
		for _, host := range []string{"", "node-1", `we"ird\host<&>`, "hôte"} {
			b := newBackend(nil, false, options{})
			b.pid, b.host, b.head = pid, host, holderHead(pid, host)
			for _, since := range times {
				for _, mode := range []string{"", "shared", "exclusive", `q"uote`, "Upper"} {
					for _, n := range []int64{0, 3, -1} {
						want, _ := json.Marshal(holder{PID: pid, Host: host, Since: since, Mode: mode, N: n})
						if got := b.holderValueAt(since, mode, n); got != string(want) {
							t.Errorf("pid %d host %q since %v mode %q n %d:\n got %s\nwant %s", pid, host, since, mode, n, got, want)
						}
					}
				}
			}
		}
	}
}
