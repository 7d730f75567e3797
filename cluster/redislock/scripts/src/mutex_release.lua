-- mutex_release: compare-and-delete of the hold, then handoff to the head
-- of the queue.
-- KEYS: as in mutex_common.lua
-- ARGV[1] hold id
-- Returns 1 when the hold was released, 0 when it was not held (lost).
local id = ARGV[1]
-- The hold, the waiter sequence, which exists while anyone waits
-- (mutex_common.lua), and the counter, for the next holder's token.
local v = redis.call('MGET', KEYS[1], KEYS[6], KEYS[2])
if not v[1] or string.sub(v[1], 1, #id + 1) ~= id .. '|' then return 0 end
-- Fast path: nobody waits, so nobody is told: GET, DEL.
if not v[2] then
  redis.call('DEL', KEYS[1])
  return 1
end
-- @prelude
-- The next holder's hold overwrites ours; without one, ours goes.
local passed, more = pass_on(v[3])
if not passed then redis.call('DEL', KEYS[1]) end
-- A release only removes waiters, so the expiry the queue's keys have (set
-- when a waiter was added or checked in) still covers those left; they go
-- with the last.
if not more then redis.call('DEL', unpack(QUEUE_KEYS)) end
return 1
