// Package batch lets the handles of one name in a Backend share what they
// need: calls gathered into batches (Gather) and state kept while any of
// them is open (Shared). The SQL and Redis backends gather their queue
// claims and acks with it.
package batch

import "sync"

// Gather runs the calls of many goroutines as batches, one batch at a
// time: a call made while a batch runs waits for the next one, which
// serves it with every other call that came meanwhile, in their order of
// arrival. The caller of the first call of a batch runs it (no goroutine
// of its own waits for work), then hands the next batch to the first
// call still waiting. The zero value is ready to use.
type Gather[T any] struct {
	mu      sync.Mutex
	pending []*Gathered[T] // guarded by mu: in order of arrival
	busy    bool           // guarded by mu: a batch runs, or is handed over
}

// Gathered is one call: its value (arguments and results, which run
// fills) and the signal that ends its wait.
type Gathered[T any] struct {
	V    T
	wake chan bool // set by Do; true: run the next batch, false: served
}

// Do runs c in a batch of at most limit weight (the weight of a call is
// weight(c); a call heavier than limit runs alone), and returns once run
// has served it.
func (g *Gather[T]) Do(c *Gathered[T], limit int, weight func(*T) int, run func([]*Gathered[T])) {
	c.wake = make(chan bool, 1)
	g.mu.Lock()
	g.pending = append(g.pending, c)
	if g.busy {
		g.mu.Unlock()
		if !<-c.wake {
			return
		}
		g.mu.Lock()
	}
	g.busy = true
	// c is the first of pending: either it found no batch running, or the
	// last batch handed over to the first call waiting.
	k, w := 0, 0
	for k < len(g.pending) && (k == 0 || w+weight(&g.pending[k].V) <= limit) {
		w += weight(&g.pending[k].V)
		k++
	}
	batch := g.pending[:k:k]
	g.pending = g.pending[k:]
	g.mu.Unlock()

	run(batch)

	for _, o := range batch[1:] {
		o.wake <- false
	}
	g.mu.Lock()
	if len(g.pending) > 0 {
		g.pending[0].wake <- true
	} else {
		g.busy = false
		g.pending = nil
	}
	g.mu.Unlock()
}

// Waiting is the number of calls waiting for a batch (not those of the
// batch that runs).
func (g *Gather[T]) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.pending)
}
