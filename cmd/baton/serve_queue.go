package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/queuedetail"
)

// The queues of the live view: their counts, read from the Detail every
// backend writes alike (internal/queuedetail), and the status page's
// requeue and purge of dead letters.

// jsonQueue is the "queue" of a queue's object in /api/objects.
type jsonQueue struct {
	Ready              int      `json:"ready"`
	Delayed            int      `json:"delayed"`
	InFlight           int      `json:"in_flight"`
	Dead               int      `json:"dead"`
	OldestReadySeconds *float64 `json:"oldest_ready_seconds,omitempty"`
}

func queueJSON(in baton.Info) *jsonQueue {
	c, ok := queuedetail.Parse(in)
	if !ok {
		return nil
	}
	q := &jsonQueue{Ready: c.Ready, Delayed: c.Delayed, InFlight: c.InFlight, Dead: c.Dead}
	if c.Oldest > 0 {
		s := c.Oldest.Seconds()
		q.OldestReadySeconds = &s
	}
	return q
}

// pageToken is a random token made for one server instance: the page
// carries it in its forms, and a POST without it is refused, so that
// another site cannot make a visitor's browser act on the queues even
// where the browser sends no Origin or Sec-Fetch-Site.
func pageToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// queueOpener is a Backend, or the reopening Inspector once its backend
// answers.
type queueOpener interface {
	Queue(ctx context.Context, name string) (baton.Queue, error)
}

// deadLettersHandler serves POST /queues/{op} (requeue or purge) of every
// dead letter of the queue named by the form's name, with the page's
// token; it answers with a redirect to the page. Cross-origin requests
// are refused (403) before the token is looked at.
func deadLettersHandler(in baton.Inspector, token string) http.Handler {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := r.PathValue("op")
		if op != "requeue" && op != "purge" {
			http.NotFound(w, r)
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.PostFormValue("token")), []byte(token)) != 1 {
			http.Error(w, "the page's token is missing or wrong: reload the page", http.StatusForbidden)
			return
		}
		name := r.PostFormValue("name")
		if err := baton.ValidateName(name); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		qo, ok := in.(queueOpener)
		if !ok {
			http.Error(w, "the backend serves no queues", http.StatusNotImplemented)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), inspectTimeout)
		defer cancel()
		n, err := deadLetters(ctx, qo, name, op)
		if err != nil {
			http.Error(w, fmt.Sprintf("%s dead letters of %s: %v", op, name, err), http.StatusBadGateway)
			return
		}
		w.Header().Set("X-Baton-Jobs", strconv.Itoa(n))
		http.Redirect(w, r, "../", http.StatusSeeOther)
	})
	return http.NewCrossOriginProtection().Handler(h)
}

// deadLetters requeues or purges every dead letter of queue name and
// returns how many.
func deadLetters(ctx context.Context, qo queueOpener, name, op string) (int, error) {
	q, err := qo.Queue(ctx, name)
	if err != nil {
		return 0, err
	}
	defer q.Close()
	ds, err := q.Dead(ctx, 1<<30)
	if err != nil || len(ds) == 0 {
		return 0, err
	}
	ids := make([]baton.JobID, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	if op == "purge" {
		return q.Purge(ctx, ids...)
	}
	return q.Requeue(ctx, ids...)
}
