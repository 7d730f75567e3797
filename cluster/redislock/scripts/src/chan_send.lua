-- chan_send: append as many of the messages as there is room for.
-- KEYS: as in chan_common.lua
-- ARGV[1] the receivers' wake-up channel
-- ARGV[2] the request's id, ARGV[3] the receipts' lifetime (ms)
-- ARGV[4] n, the count of receipts to forget, ARGV[5..4+n] their ids
-- ARGV[5+n..] the messages, in order (checked against the largest message
-- by the caller)
-- Returns how many were appended (0: full), -1 when the channel is closed,
-- -2 when it is gone. Receivers wait only on an empty list, so only an
-- append to an empty list wakes them: one message per batch at most.
local p = redis.call('HMGET', KEYS[2], 'cap', 'closed')
if not p[1] then return -2 end
local again = redis.call('HGET', KEYS[3], ARGV[2])
if again then return tonumber(again) end
local first = 5 + tonumber(ARGV[4])
forget(5, first - 1)
if p[2] == '1' then return -1 end
local len = redis.call('LLEN', KEYS[1])
local k = math.min(tonumber(p[1]) - len, #ARGV - first + 1)
if k <= 0 then return 0 end
redis.call('RPUSH', KEYS[1], unpack(ARGV, first, first + k - 1))
redis.call('HSET', KEYS[3], ARGV[2], k)
redis.call('PEXPIRE', KEYS[3], ARGV[3])
if len == 0 then redis.call('PUBLISH', ARGV[1], 'm') end
return k
