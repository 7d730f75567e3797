package mysqllock

import (
	"context"
	"fmt"
	"time"
)

// Sleeping claimants and their wake-ups (see queue.go).

// sleep waits until the generation moves from gen, a ring interrupts it,
// or the slice ends: next (when the next delayed job or lease is due), at
// most the TTL.
func (d *queueDriver) sleep(ctx context.Context, gen uint64, next time.Duration) error {
	slice := d.b.c.TTL
	if next > 0 && next < slice {
		slice = max(next, time.Millisecond)
	}
	cond := fmt.Sprintf("(SELECT token FROM %s WHERE name = %s) = %d", d.b.t.lock, binLit(d.ids), gen)
	return d.b.sleepWhile(ctx, d.mark, cond, seconds(slice), slice)
}

// wakeSleepers interrupts the sleeping claimants of the queue, after a
// commit that moved the generation and found claimants counted as
// sleeping (drawIDs): one counted later read the moved generation, and
// sleeps not; one counted sooner sleeps in a statement that this finds.
func (d *queueDriver) wakeSleepers() { d.b.wake(d.mark) }

// countSleeper adds delta to the count of the queue's claimants that may
// sleep, which spares a Put the read of the process list when it is 0. A
// claimant that dies counted leaves it above 0: Puts then read the list,
// as they would with sleepers.
func (d *queueDriver) countSleeper(delta int) error {
	ctx, cancel := context.WithTimeout(context.Background(), d.b.c.RequestTimeout)
	defer cancel()
	_, err := d.b.db.ExecContext(ctx, `UPDATE `+d.b.t.lock+` SET token = IF(CAST(token AS SIGNED) + ? < 0, 0, CAST(token AS SIGNED) + ?) WHERE name = ?`, delta, delta, d.count)
	return err
}

// ring moves the generation and wakes the sleepers, after a change that
// made a job ready other than a Put.
func (d *queueDriver) ring() {
	ctx, cancel := context.WithTimeout(context.Background(), d.b.c.RequestTimeout)
	defer cancel()
	if _, sleepers, err := drawIDs(ctx, d.b.db, d.b.t.lock, d.name, 1, d.count); err == nil && sleepers {
		d.wakeSleepers()
	}
}
