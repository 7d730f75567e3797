// Package queuedetail is the Detail of a queue's baton.Info, written alike
// by every backend's Inspector and read by baton top, the status page and
// the metrics collector: "ready R, delayed D, in flight F, dead X", and
// ", oldest ready AGE" when a ready job waits and the backend knows since
// when (AGE as time.Duration prints it, to the millisecond).
package queuedetail

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/batonlock/baton"
)

// Counts are a queue's jobs by state.
type Counts struct {
	Ready, Delayed, InFlight, Dead int
	Oldest                         time.Duration // of the oldest ready job; 0 when none or unknown
}

// Format writes the Detail of a queue with counts c.
func Format(c Counts) string {
	s := fmt.Sprintf("ready %d, delayed %d, in flight %d, dead %d", c.Ready, c.Delayed, c.InFlight, c.Dead)
	if c.Ready > 0 && c.Oldest > 0 {
		s += ", oldest ready " + c.Oldest.Round(time.Millisecond).String()
	}
	return s
}

var detailRE = regexp.MustCompile(`^ready (\d+), delayed (\d+), in flight (\d+), dead (\d+)(?:, oldest ready (\S+))?$`)

// Parse reads the counts of a queue's Info; false when it is not a queue's
// or its Detail is not one Format wrote.
func Parse(in baton.Info) (Counts, bool) {
	m := detailRE.FindStringSubmatch(in.Detail)
	if in.Kind != baton.KindQueue || m == nil {
		return Counts{}, false
	}
	var c Counts
	for i, p := range []*int{&c.Ready, &c.Delayed, &c.InFlight, &c.Dead} {
		n, err := strconv.Atoi(m[i+1])
		if err != nil {
			return Counts{}, false
		}
		*p = n
	}
	if m[5] != "" {
		d, err := time.ParseDuration(m[5])
		if err != nil {
			return Counts{}, false
		}
		c.Oldest = d
	}
	return c, true
}
