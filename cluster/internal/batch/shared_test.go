package batch

import "testing"

// TestShared: holds of one name share its value until the last is
// dropped; a name held again after that starts from a new value.
func TestShared(t *testing.T) {
	var s Shared[int]
	a, b := s.Hold("q"), s.Hold("q")
	if a != b {
		t.Fatal("two holds of one name got different values")
	}
	*a = 7
	if c := s.Hold("other"); c == a || *c != 0 {
		t.Fatal("another name shares the value")
	}
	s.Drop("other")
	s.Drop("q")
	if s.Len() != 1 || *s.Hold("q") != 7 {
		t.Fatal("the value went while a hold was left")
	}
	s.Drop("q")
	s.Drop("q")
	if s.Len() != 0 {
		t.Fatalf("%d names kept after the last drop", s.Len())
	}
	if d := s.Hold("q"); *d != 0 {
		t.Fatal("a name held again kept its old value")
	}
	s.Drop("unknown") // nothing held: nothing happens
}
