package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batonlock/baton"
)

// The output of status and ls: text, a table, or JSON.

// jsonReport is the --json output of status and ls.
type jsonReport struct {
	Schema  int          `json:"schema"`
	Backend string       `json:"backend"`
	Objects []jsonObject `json:"objects"`
}

type jsonObject struct {
	Name      string       `json:"name"`
	Kind      baton.Kind   `json:"kind"`
	Backend   string       `json:"backend"`
	Impl      string       `json:"impl,omitempty"`
	Holders   []jsonHolder `json:"holders"`
	Waiters   int          `json:"waiters"` // -1 when unknown
	Capacity  int64        `json:"capacity,omitempty"`
	LastToken uint64       `json:"last_token,omitempty,string"`
	Detail    string       `json:"detail,omitempty"`
	Queue     *jsonQueue   `json:"queue,omitempty"` // a queue's counts, read from Detail
}

type jsonHolder struct {
	PID        int      `json:"pid,omitempty"`
	Host       string   `json:"host,omitempty"`
	Owner      string   `json:"owner,omitempty"`       // baton.Holder.Owner
	Since      string   `json:"since,omitempty"`       // RFC 3339, when known
	AgeSeconds *float64 `json:"age_seconds,omitempty"` // when Since is known
	Token      uint64   `json:"token,omitempty,string"`
	Mode       string   `json:"mode,omitempty"`
	N          int64    `json:"n,omitempty"`
	TTLSeconds *float64 `json:"ttl_seconds,omitempty"` // lease time left, lease backends
}

func toJSON(in baton.Info, now time.Time) jsonObject {
	o := jsonObject{Name: in.Name, Kind: in.Kind, Backend: in.Backend, Impl: in.Impl,
		Holders: []jsonHolder{}, Waiters: in.Waiters, Capacity: in.Capacity,
		LastToken: uint64(in.LastToken), Detail: in.Detail, Queue: queueJSON(in)}
	for _, h := range in.Holders {
		j := jsonHolder{PID: h.PID, Host: h.Host, Owner: h.Owner, Token: uint64(h.Token), Mode: h.Mode, N: h.N}
		if !h.Since.IsZero() {
			j.Since = h.Since.UTC().Format(time.RFC3339Nano)
			age := now.Sub(h.Since).Seconds()
			j.AgeSeconds = &age
		}
		if h.TTL > 0 {
			ttl := h.TTL.Seconds()
			j.TTLSeconds = &ttl
		}
		o.Holders = append(o.Holders, j)
	}
	return o
}

func writeJSON(w io.Writer, raw string, infos []baton.Info) error {
	now := time.Now()
	rep := jsonReport{Schema: jsonSchema, Backend: baton.RedactURL(raw), Objects: []jsonObject{}}
	for _, in := range infos {
		rep.Objects = append(rep.Objects, toJSON(in, now))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func writeText(w io.Writer, infos []baton.Info) {
	for _, in := range infos {
		fmt.Fprintf(w, "%s  %s", in.Name, in.Kind)
		if in.Capacity > 0 {
			fmt.Fprintf(w, " of %d", in.Capacity)
		}
		impl := in.Backend
		if in.Impl != "" {
			impl += "/" + in.Impl
		}
		fmt.Fprintf(w, "  (%s)", impl)
		if in.LastToken > 0 {
			fmt.Fprintf(w, "  last token %d", in.LastToken)
		}
		// Detail is the backend's raw state (a futex word, ticket
		// counters, a key): for --json, not for people; but a queue's is
		// its counts by state, in words.
		fmt.Fprintln(w)
		if in.Kind == baton.KindQueue && in.Detail != "" {
			fmt.Fprintf(w, "  %s\n", in.Detail)
		}
		if len(in.Holders) == 0 {
			fmt.Fprintln(w, "  free")
		}
		for _, h := range in.Holders {
			fmt.Fprintf(w, "  held by %s\n", holderText(h))
		}
		if in.Waiters >= 0 {
			fmt.Fprintf(w, "  %d waiting\n", in.Waiters)
		}
	}
}

func writeTable(w io.Writer, infos []baton.Info) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tHOLDERS\tWAITERS\tIMPL")
	for _, in := range infos {
		hs := make([]string, 0, len(in.Holders))
		for _, h := range in.Holders {
			hs = append(hs, holderText(h))
		}
		holders := strings.Join(hs, "; ")
		if holders == "" {
			holders = "-"
		}
		waiters := "?"
		if in.Waiters >= 0 {
			waiters = fmt.Sprint(in.Waiters)
		}
		kind := string(in.Kind)
		if in.Capacity > 0 {
			kind += fmt.Sprintf("/%d", in.Capacity)
		}
		impl := in.Backend
		if in.Impl != "" {
			impl += "/" + in.Impl
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", in.Name, kind, holders, waiters, impl)
	}
	_ = tw.Flush()
}

// holderText describes one holder in a few words: "pid 42 on box1,
// exclusive, token 7, for 3s, lease 8s left".
func holderText(h baton.Holder) string {
	var parts []string
	who := "an unknown process"
	if h.PID > 0 {
		who = fmt.Sprintf("pid %d", h.PID)
	}
	if h.Host != "" {
		who += " on " + h.Host
	}
	if h.Owner != "" {
		who += " (owner " + h.Owner + ")"
	}
	parts = append(parts, who)
	if h.Mode != "" {
		parts = append(parts, h.Mode)
	}
	if h.N > 0 {
		parts = append(parts, fmt.Sprintf("%d permits", h.N))
	}
	if h.Token > 0 {
		parts = append(parts, fmt.Sprintf("token %d", h.Token))
	}
	if !h.Since.IsZero() {
		parts = append(parts, "for "+time.Since(h.Since).Round(time.Second).String())
	}
	if h.TTL > 0 {
		parts = append(parts, "lease "+h.TTL.Round(100*time.Millisecond).String()+" left")
	}
	return strings.Join(parts, ", ")
}
