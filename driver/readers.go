package driver

import "github.com/batonlock/baton/internal/word"

// ReadCounter is implemented by RWMutex drivers whose handle counts its
// anonymous readers in memory shared by every process that uses the lock
// (the shared-memory RWMutex). The core then takes and gives back the read
// holds of goroutines with no owner through the count (package
// internal/word), with no handle lock and no call into the driver, while
// no writer holds, drains or waits, and no writer of the handle queues;
// the driver's Acquire, TryAcquire and Release serve every other case, and
// its writers wait for the holds counted by every handle, their own
// included.
type ReadCounter interface {
	// ReadCounter returns the handle's count and the Loss that goes with
	// every hold counted in it. It is called once, when the handle is
	// opened; the count must stay valid until the driver is unreachable
	// (after Close too: a goroutine may be taking a hold while another
	// closes the handle). Close gives back every hold counted, and a later
	// change of the count through this handle fails.
	ReadCounter() (*word.Readers, *Loss)
}
