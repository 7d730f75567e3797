-- mutex_release: compare-and-delete of the hold, then handoff to the first
-- live waiter in line.
-- KEYS: as in mutex_common.lua
-- ARGV[1] hold id
-- Returns 1 when the hold was released, 0 when it was not held (lost).
local id = ARGV[1]
-- The hold, lwait, which exists while anyone may wait (mutex_common.lua),
-- and the counter, for the next holder's token.
local v = redis.call('MGET', KEYS[1], KEYS[5], KEYS[2])
if not v[1] or string.sub(v[1], 1, #id + 1) ~= id .. '|' then return 0 end
-- Fast path: nobody waits, so nobody is told: MGET, DEL.
if not v[2] then
  redis.call('DEL', KEYS[1])
  return 1
end
-- @prelude
-- The next holder's hold overwrites ours; without one, ours goes, and so
-- does lwait (the line is empty: line and lexp went with their last
-- entry). A line left with entries keeps the expiry its keys have (set
-- when a waiter was added or checked in), which covers them.
if not pass_on(v[3]) then redis.call('DEL', KEYS[1], KEYS[5]) end
return 1
