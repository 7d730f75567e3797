-- renew: extend one lease of a lock or semaphore hold.
-- KEYS[1] holders zset (hold id -> expiry ms), KEYS[2] info hash of the holds;
-- a semaphore's KEYS as in sem_common.lua
-- ARGV[1] hold id, ARGV[2] lease TTL ms
-- Returns 1 when renewed, 0 when the hold is gone or expired (lost).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not exp or tonumber(exp) <= now then return 0 end
local until_ = now + tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], until_, ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
local keep = tonumber(last[2]) - now + 1000
redis.call('PEXPIRE', KEYS[1], keep)
redis.call('PEXPIRE', KEYS[2], keep)
-- A semaphore passes its capacity as KEYS[6] (sem_common.lua): it lives as
-- long as the holds.
if KEYS[6] and redis.call('PTTL', KEYS[6]) < keep then redis.call('PEXPIRE', KEYS[6], keep) end
return 1
