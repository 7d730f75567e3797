-- rl_release: compare-and-delete this node's lease of one hold, and tell
-- waiters that the name is free when one has marked it as awaited.
-- KEYS[1] lock key, KEYS[2] waiter flag (see rl_acquire.lua)
-- ARGV[1] hold id, ARGV[2] release channel
-- Returns 1 when deleted, 0 when this node did not have the hold.
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. '|' then return 0 end
redis.call('DEL', KEYS[1])
if redis.call('DEL', KEYS[2]) == 1 then
  redis.call('PUBLISH', ARGV[2], KEYS[1])
end
return 1
