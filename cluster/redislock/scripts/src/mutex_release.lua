-- mutex_release: compare-and-delete of the hold, then handoff to the head
-- of the queue.
-- KEYS: as in mutex_common.lua
-- ARGV[1] hold id
-- Returns 1 when the hold was released, 0 when it was not held (lost).
local id = ARGV[1]
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #id + 1) ~= id .. '|' then return 0 end
-- Fast path: nobody waits.
if redis.call('EXISTS', KEYS[3]) == 0 then
  redis.call('DEL', KEYS[1])
  return 1
end
-- @prelude
-- The next holder's hold overwrites ours; without one, ours goes.
if not pass_on() then redis.call('DEL', KEYS[1]) end
-- A release only removes waiters, so the expiry the queue's keys have (set
-- when a waiter was added or checked in) still covers those left; they go
-- with the last.
if redis.call('EXISTS', QEXP) == 0 then redis.call('DEL', unpack(QUEUE_KEYS)) end
return 1
