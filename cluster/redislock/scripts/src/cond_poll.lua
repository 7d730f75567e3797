-- cond_poll: a waiter checks in; refreshes its registration.
-- KEYS: as in cond_common.lua
-- ARGV[1] ticket, ARGV[2] registration TTL ms
-- Returns 1 while registered, 0 once signalled (the registration is gone).
prune_queue()
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
tidy()
return 1
