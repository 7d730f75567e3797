-- chan_remove: delete the channel (baton rm) and wake its waiters, who
-- then find it gone.
-- KEYS: as in chan_common.lua
-- ARGV[1] the receivers' wake-up channel, ARGV[2] the senders'
-- Returns how many keys were deleted.
local n = redis.call('DEL', KEYS[1], KEYS[2])
redis.call('PUBLISH', ARGV[1], 'r')
redis.call('PUBLISH', ARGV[2], 'r')
return n
