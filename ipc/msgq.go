package ipc

import (
	"fmt"

	"github.com/batonlock/baton"
)

// Message is one message of a queue: a type (> 0) and a body.
type Message struct {
	Type int64
	Body []byte
}

// checkSend validates a message before any side effect.
func checkSend(typ int64, body []byte, maxSize int) error {
	if typ <= 0 {
		return fmt.Errorf("%w: message type %d, must be > 0", baton.ErrInvalidArgument, typ)
	}
	if len(body) > maxSize {
		return fmt.Errorf("%w: message of %d bytes, the queue takes at most %d", baton.ErrInvalidArgument, len(body), maxSize)
	}
	return nil
}
