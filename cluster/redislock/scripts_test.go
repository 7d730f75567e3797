package redislock

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/batonlock/baton/cluster/redislock/internal/luagen"
)

// TestScriptsGenerated fails when a script in scripts/ differs from what
// go generate assembles from scripts/src.
func TestScriptsGenerated(t *testing.T) {
	want, err := luagen.Generate(os.DirFS("scripts/src"))
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		t.Fatal("no script in scripts/src")
	}
	for name, w := range want {
		got, err := os.ReadFile(filepath.Join("scripts", name))
		if err != nil || !bytes.Equal(got, w) {
			t.Errorf("scripts/%s is stale (%v): run go generate ./cluster/redislock", name, err)
		}
	}
}

// TestQueueCommonPathsPassStrings fails when the scripts of a job's common
// path (put, claim, ack) give a command a Lua number: the server formats it
// as a double, which costs more than most of their commands. Literals are
// written as strings, the server time as nows.
func TestQueueCommonPathsPassStrings(t *testing.T) {
	number := regexp.MustCompile(`^-?[0-9]+$|\bnow\b`)
	for _, name := range []string{"jobs_put.lua", "jobs_claim.lua", "jobs_ack.lua"} {
		src, err := os.ReadFile(filepath.Join("scripts/src", name))
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range strings.Split(string(src), "\n") {
			for _, call := range strings.Split(l, "redis.call(")[1:] {
				for _, arg := range luaArgs(call) {
					if number.MatchString(arg) && !strings.HasPrefix(arg, "fmt(") {
						t.Errorf("%s:%d: redis.call argument %q is a number", name, i+1, arg)
					}
				}
			}
		}
	}
}

// luaArgs splits the arguments of a call, from after its "(" to its ")",
// at the commas outside parentheses and strings.
func luaArgs(s string) []string {
	var args []string
	depth, start := 0, 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '(':
			depth++
		case c == ')' && depth == 0:
			return append(args, strings.TrimSpace(s[start:i]))
		case c == ')':
			depth--
		case c == ',' && depth == 0:
			args = append(args, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return append(args, strings.TrimSpace(s[start:]))
}
