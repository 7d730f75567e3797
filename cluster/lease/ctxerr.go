package lease

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// CtxErr returns an error matching the context's when ctx is done or past
// its deadline, else err: a request cut short by its context can fail with
// the error of what it was doing then (a dial's i/o timeout, which can come
// before the context's own timer has marked it done).
func CtxErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	cerr := ctx.Err()
	if dl, ok := ctx.Deadline(); cerr == nil && ok && !time.Now().Before(dl) {
		cerr = context.DeadlineExceeded
	}
	if cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}
