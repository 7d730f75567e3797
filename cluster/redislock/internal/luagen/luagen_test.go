package luagen

import (
	"strings"
	"testing"
	"testing/fstest"
)

// A pruned prelude keeps the functions a script calls, directly or through
// the functions kept, with their comments, and drops the others; a script
// of a prelude without the mark gets every function.
func TestPrune(t *testing.T) {
	common := `local function head() return 1 end
-- @end head
-- @prune
local t = 1

-- used calls helper.
local function used(x)
  if x then
    return helper(x)
  end
end
local function helper(x) return x end
-- unused is called by nobody.
local function unused()
  return used(1)
end
local function my_used() return 2 end
`
	src := fstest.MapFS{
		"k_common.lua": {Data: []byte(common)},
		"k_op.lua":     {Data: []byte("if head() then return 0 end\n-- @prelude\nreturn used(t)\n")},
		"n_common.lua": {Data: []byte(strings.Replace(common, "-- @prune\n", "", 1))},
		"n_op.lua":     {Data: []byte("return used(t)\n")},
	}
	out, err := Generate(src)
	if err != nil {
		t.Fatal(err)
	}
	k := string(out["k_op.lua"])
	for _, want := range []string{"local function head(", "local t = 1", "-- used calls helper.", "local function used(", "    return helper(x)\n  end\nend\n", "local function helper(", "return used(t)"} {
		if !strings.Contains(k, want) {
			t.Errorf("pruned script lacks %q:\n%s", want, k)
		}
	}
	for _, gone := range []string{"unused", "my_used", "@prune"} {
		if strings.Contains(k, gone) {
			t.Errorf("pruned script has %q:\n%s", gone, k)
		}
	}
	if n := string(out["n_op.lua"]); !strings.Contains(n, "local function unused(") || !strings.Contains(n, "local function my_used(") {
		t.Errorf("a prelude without @prune lost functions:\n%s", n)
	}
}

// A script marked alone gets none of its prelude, head included.
func TestAlone(t *testing.T) {
	src := fstest.MapFS{
		"k_common.lua": {Data: []byte("local t = head()\n-- @end head\nlocal function f() return 1 end\n")},
		"k_op.lua":     {Data: []byte("-- @alone\nreturn 2\n")},
	}
	out, err := Generate(src)
	if err != nil {
		t.Fatal(err)
	}
	if k := string(out["k_op.lua"]); strings.Contains(k, "head()") || strings.Contains(k, "local function f(") || !strings.Contains(k, "return 2") {
		t.Errorf("a script alone got its prelude, or lost its body:\n%s", k)
	}
}
