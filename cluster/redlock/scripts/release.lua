-- rl_release: compare-and-delete this node's lease of one hold, and tell
-- the waiters this node refused since its last release that the name is
-- free, and how many they are.
-- KEYS[1] lock key, KEYS[2] waiters (see rl_acquire.lua)
-- ARGV[1] hold id, ARGV[2] release channel
-- Returns 1 when deleted, 0 when this node did not have the hold.
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. '|' then return 0 end
redis.call('DEL', KEYS[1])
local n = redis.call('SCARD', KEYS[2])
if n > 0 then
  redis.call('DEL', KEYS[2])
  -- "waiters|lock key", read by listen in redlock.go
  redis.call('PUBLISH', ARGV[2], n .. '|' .. KEYS[1])
end
return 1
