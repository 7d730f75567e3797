package pglock

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonlock/baton"
)

// TestQueueClaimReadsFewRows: a claim of one job (or five), and an Ack of
// five, reads a few rows of the jobs table, not every ready job of the
// queue (a scan and sort of the whole backlog made each claim's cost grow
// with the queue's depth).
func TestQueueClaimReadsFewRows(t *testing.T) {
	ctx := context.Background()
	_, q := openQueueT(t, "claim-plan")
	specs := make([]baton.JobSpec, 500)
	for i := range specs {
		specs[i] = baton.JobSpec{Payload: []byte("job")}
	}
	for range 2 {
		if _, err := q.PutBatch(ctx, specs); err != nil {
			t.Fatal(err)
		}
	}
	// Five claims for the Ack's statement (the claims' own statements
	// run in rolled-back transactions).
	var ids, toks []int64
	for range 5 {
		j, err := q.TryClaim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids, toks = append(ids, int64(j.ID())), append(toks, int64(j.Token()))
	}
	c, err := pgx.Connect(ctx, need(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "ANALYZE baton_jobs"); err != nil {
		t.Fatal(err)
	}
	for _, c1 := range []struct {
		name, sql string
		args      []any
		most      float64
	}{
		{"one", jobsClaimOneSQL, []any{"claim-plan", 10000, 1, time.Time{}, int64(0)}, 10},
		{"five", jobsClaimSQL, []any{"claim-plan", 5, 10000, []int32{1, 2, 3, 4, 5}, time.Time{}, int64(0)}, 20},
		{"ack five", jobsAckManySQL, []any{ids, toks}, 5},
	} {
		t.Run(c1.name, func(t *testing.T) { claimReadsFew(t, c, c1.sql, c1.args, c1.most, false) })
		// As the Backend's connections run it: prepared, and planned once
		// for any arguments (OpenURL's plan_cache_mode).
		t.Run(c1.name+" generic", func(t *testing.T) { claimReadsFew(t, c, c1.sql, c1.args, c1.most, true) })
	}
}

// TestGenericPlans: OpenURL's connections keep one plan per prepared
// statement, so that a gathered claim, whose LIMIT and claimants are
// arguments, is not planned again at each run; a URL that sets the mode
// keeps its own.
func TestGenericPlans(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ query, want string }{
		{"", "force_generic_plan"},
		{"&plan_cache_mode=auto", "auto"},
	} {
		pool, _, err := openPool(ctx, need(t)+c.query, nil)
		if err != nil {
			t.Fatal(err)
		}
		var mode string
		err = pool.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode)
		pool.Close()
		if err != nil || mode != c.want {
			t.Fatalf("URL with %q: plan_cache_mode %q, %v; want %q", c.query, mode, err, c.want)
		}
	}
}

// claimReadsFew runs the claim statement under EXPLAIN ANALYZE, in a
// transaction rolled back, and checks that no scan of baton_jobs gave
// more than most rows.
func claimReadsFew(t *testing.T, c *pgx.Conn, sql string, args []any, bound float64, generic bool) {
	ctx := context.Background()
	if generic {
		// A prepared statement outlives the transaction.
		defer c.Exec(ctx, "DEALLOCATE claim_plan")
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var plan []struct{ Plan planNode }
	if generic {
		// A prepared statement run with the mode set plans without the
		// arguments, as the Backend's connections do.
		lits := make([]string, len(args))
		for i, a := range args {
			lits[i] = literal(a)
		}
		_, err = tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan")
		if err == nil {
			_, err = tx.Exec(ctx, "PREPARE claim_plan AS "+sql)
		}
		if err == nil {
			err = tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE claim_plan("+strings.Join(lits, ", ")+")").Scan(&plan)
		}
		if err != nil {
			t.Fatal(err)
		}
	} else if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	if len(plan) != 1 {
		t.Fatalf("plan: %+v", plan)
	}
	most := 0.0
	var walk func(n planNode)
	walk = func(n planNode) {
		if n.Relation == "baton_jobs" {
			most = max(most, n.Rows*max(n.Loops, 1))
		}
		for _, k := range n.Plans {
			walk(k)
		}
	}
	walk(plan[0].Plan)
	if most == 0 || most > bound {
		b, _ := json.MarshalIndent(plan, "", " ")
		t.Fatalf("a scan of baton_jobs gave %v rows among 1000 jobs:\n%s", most, b)
	}
}

// planNode is a node of EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON).
type planNode struct {
	Type     string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Index    string     `json:"Index Name"`
	Rows     float64    `json:"Actual Rows"`
	Loops    float64    `json:"Actual Loops"`
	Hit      float64    `json:"Shared Hit Blocks"`
	Read     float64    `json:"Shared Read Blocks"`
	Plans    []planNode `json:"Plans"`
}

// literal writes an argument of the plan tests as SQL.
func literal(a any) string {
	switch v := a.(type) {
	case string:
		return "'" + strings.ReplaceAll(v, "'", "''") + "'"
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case time.Time:
		return "'" + v.UTC().Format("2006-01-02 15:04:05.999999") + "+00'"
	case []int32:
		s := make([]string, len(v))
		for i, x := range v {
			s[i] = strconv.Itoa(int(x))
		}
		return "'{" + strings.Join(s, ",") + "}'"
	case []int64:
		s := make([]string, len(v))
		for i, x := range v {
			s[i] = strconv.FormatInt(x, 10)
		}
		return "'{" + strings.Join(s, ",") + "}'"
	}
	panic(fmt.Sprintf("no literal for %T", a))
}
