-- chan_release: a handle's Close puts back the messages of its receives
-- whose replies it never got, and deletes its receipts.
-- KEYS: as in chan_common.lua
-- ARGV[1] the receivers' wake-up channel
-- ARGV[2..] the ids of the receives to restore
-- Returns how many messages went back (-2: the channel is gone).
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('DEL', KEYS[3])
  return -2
end
local before = redis.call('LLEN', KEYS[1])
restore(2, #ARGV)
redis.call('DEL', KEYS[3])
local n = redis.call('LLEN', KEYS[1]) - before
if n > 0 and before == 0 then redis.call('PUBLISH', ARGV[1], 'm') end
return n
