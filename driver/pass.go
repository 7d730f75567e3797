package driver

// Passer is implemented by lock drivers whose exclusive grant can be handed
// to another handle of the same Backend and name with no call to the
// server, because the server knows the Backend as the holder, not the
// handle (one lease, one owner id per Backend).
//
// For such Mutex drivers the core queues the goroutines of every handle of
// a name in one FIFO per Backend, lets one handle at a time call Acquire or
// TryAcquire (so one waits on the server), and when a grant is released
// while a goroutine waits in that FIFO, asks the driver to pass it to that
// goroutine's handle (which may be the same handle). A grant goes round a
// Backend for a bounded time (5 ms) after it came from Acquire or
// TryAcquire, and then is released there, so that other clients of the
// server wait at most one round more; the next handle then acquires from
// the server.
type Passer interface {
	// Pass turns g, an exclusive grant of this driver, into a grant of the
	// same hold for another handle of the Backend on the same name: a
	// token strictly greater than g's and than every token given before
	// for the name (drivers reserve a range on the server with each
	// acquisition), and a Loss of its own that fires, from then on instead
	// of g's, when the hold beneath is lost. The receiving driver's Release
	// and Passer accept the grant as their own.
	//
	// It reports false, changing nothing, when it cannot (no reserved token
	// left, the hold already lost or too close to its deadline); the core
	// then releases g.
	//
	// The core calls Pass with a lock of its own held, while no other call
	// of any driver of the name's handles holds or takes the grant: Pass must
	// not block and makes no call to the server.
	Pass(g Grant) (Grant, bool)
}
