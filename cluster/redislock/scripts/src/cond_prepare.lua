-- cond_prepare: register a waiter.
-- KEYS: as in cond_common.lua
-- ARGV[1] ticket, ARGV[2] registration TTL ms, ARGV[3] wake channel
-- Returns 1.
prune_queue()
local seq = redis.call('INCR', KEYS[4])
redis.call('ZADD', KEYS[1], seq, ARGV[1])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
tidy()
return 1
