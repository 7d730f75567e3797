-- rl_release: compare-and-delete this node's lease of one hold, and tell
-- waiters that the name is free.
-- KEYS[1] lock key
-- ARGV[1] hold id, ARGV[2] release channel
-- Returns 1 when deleted, 0 when this node did not have the hold.
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. '|' then return 0 end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], KEYS[1])
return 1
