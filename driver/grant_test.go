package driver_test

import (
	"errors"
	"testing"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

type mine struct{ n int }
type theirs struct{}

func TestDataOf(t *testing.T) {
	d, err := driver.DataOf[mine](driver.Grant{Data: &mine{n: 7}})
	if err != nil || d.n != 7 {
		t.Fatalf("DataOf of its own grant: %v, %v", d, err)
	}
	for name, g := range map[string]driver.Grant{
		"empty":          {},
		"another driver": {Data: &theirs{}},
		"not a pointer":  {Data: mine{}},
		"nil pointer":    {Data: (*mine)(nil)},
	} {
		if _, err := driver.DataOf[mine](g); !errors.Is(err, driver.ErrForeignGrant) || !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrForeignGrant matching ErrInvalidArgument", name, err)
		}
	}
}
