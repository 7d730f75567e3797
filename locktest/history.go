package locktest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Rec is one hold in a history: when it was certainly held (from the return
// of the acquisition to the call of the release, on the system-wide
// monotonic clock), in which mode, with which token and permit count.
type Rec struct {
	Start, End int64 // CLOCK_MONOTONIC ns, comparable across processes
	Exclusive  bool
	Token      uint64
	N          int64  // permits (semaphores); 1 for locks
	Who        string // process/goroutine, for messages
}

// History collects records; it is safe for concurrent use.
type History struct {
	mu   sync.Mutex
	recs []Rec // guarded by mu
}

// Add records one hold.
func (h *History) Add(r Rec) {
	h.mu.Lock()
	h.recs = append(h.recs, r)
	h.mu.Unlock()
}

// Records returns a copy of the records.
func (h *History) Records() []Rec {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Rec(nil), h.recs...)
}

// WriteTo writes the records as text, one per line.
func (h *History) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriter(w)
	for _, r := range h.Records() {
		fmt.Fprintf(bw, "%d %d %t %d %d %s\n", r.Start, r.End, r.Exclusive, r.Token, r.N, r.Who)
	}
	return 0, bw.Flush()
}

// ReadHistory reads records written by WriteTo.
func ReadHistory(path string) ([]Rec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var recs []Rec
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 6 {
			return nil, fmt.Errorf("locktest: bad history line %q", sc.Text())
		}
		var r Rec
		var errs [5]error
		r.Start, errs[0] = strconv.ParseInt(fs[0], 10, 64)
		r.End, errs[1] = strconv.ParseInt(fs[1], 10, 64)
		r.Exclusive, errs[2] = strconv.ParseBool(fs[2])
		r.Token, errs[3] = strconv.ParseUint(fs[3], 10, 64)
		r.N, errs[4] = strconv.ParseInt(fs[4], 10, 64)
		for _, e := range errs {
			if e != nil {
				return nil, fmt.Errorf("locktest: bad history line %q: %w", sc.Text(), e)
			}
		}
		r.Who = fs[5]
		recs = append(recs, r)
	}
	return recs, sc.Err()
}

// Check verifies a history of one name: no exclusive hold overlaps any
// other hold; tokens of exclusive holds strictly increase in the order the
// holds began; at no instant are more than capacity permits held (capacity
// 0: not a semaphore). It returns one error per kind of violation found,
// with the first example.
func Check(recs []Rec, capacity int64) []error {
	var errs []error
	rs := append([]Rec(nil), recs...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].Start < rs[j].Start })
	for _, r := range rs {
		if r.End < r.Start {
			errs = append(errs, fmt.Errorf("hold by %s ends before it starts", r.Who))
			break
		}
	}
	// Overlaps involving an exclusive hold: sweep in start order, keeping
	// the latest end seen so far among all holds and among exclusive ones.
	var (
		maxEnd, maxExEnd int64 = -1, -1
		endBy, exBy      Rec
		overlaps         int
		first            string
	)
	for _, r := range rs {
		if r.Exclusive && maxEnd > r.Start || !r.Exclusive && maxExEnd > r.Start {
			other := endBy
			if !r.Exclusive {
				other = exBy
			}
			if overlaps == 0 {
				first = fmt.Sprintf("%s [%d,%d] token %d overlaps %s [%d,%d] token %d", r.Who, r.Start, r.End, r.Token, other.Who, other.Start, other.End, other.Token)
			}
			overlaps++
		}
		if r.End > maxEnd {
			maxEnd, endBy = r.End, r
		}
		if r.Exclusive && r.End > maxExEnd {
			maxExEnd, exBy = r.End, r
		}
	}
	if overlaps > 0 {
		errs = append(errs, fmt.Errorf("%d overlapping holds; first: %s", overlaps, first))
	}
	var last Rec
	bad := 0
	for _, r := range rs {
		if !r.Exclusive || r.Token == 0 && capacity > 0 {
			continue
		}
		if last.Who != "" && r.Token <= last.Token {
			if bad == 0 {
				errs = append(errs, fmt.Errorf("token %d of %s does not exceed token %d of the earlier hold by %s", r.Token, r.Who, last.Token, last.Who))
			}
			bad++
		}
		last = r
	}
	if capacity > 0 {
		type ev struct {
			t int64
			d int64
		}
		var evs []ev
		for _, r := range rs {
			evs = append(evs, ev{r.Start, r.N}, ev{r.End, -r.N})
		}
		// Ends before starts at the same instant: the bounds are inside the
		// real hold, so touching intervals are not an overlap.
		sort.Slice(evs, func(i, j int) bool {
			if evs[i].t != evs[j].t {
				return evs[i].t < evs[j].t
			}
			return evs[i].d < evs[j].d
		})
		var cur, peak int64
		for _, e := range evs {
			cur += e.d
			peak = max(peak, cur)
		}
		if peak > capacity {
			errs = append(errs, fmt.Errorf("%d permits held at once, capacity %d", peak, capacity))
		}
	}
	return errs
}
