-- mutex_release: compare-and-delete of the hold, then handoff to the head
-- of the queue.
-- KEYS: as in mutex_common.lua
-- ARGV[1] hold id
-- Returns 1 when the hold was released, 0 when it was not held (lost).
local id = ARGV[1]
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #id + 1) ~= id .. '|' then return 0 end
redis.call('DEL', KEYS[1])
-- Fast path: nobody waits.
if redis.call('EXISTS', KEYS[3]) == 0 then return 1 end
-- @prelude
handoff()
tidy()
return 1
