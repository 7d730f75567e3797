-- chan_recv: take up to ARGV[2] messages from the head of the list.
-- KEYS: as in chan_common.lua
-- ARGV[1] the senders' wake-up channel
-- ARGV[2] the most messages to take (at least 1)
-- ARGV[3] the request's id, ARGV[4] the receipts' lifetime (ms)
-- ARGV[5] n, the count of receives to restore, ARGV[6..5+n] their ids
-- ARGV[6+n..] the ids of receipts to forget
-- Returns the messages taken, oldest first (empty: none), -1 when the
-- channel is closed and empty, -2 when it is gone. Senders wait only on a
-- full list, so only a take from a full list wakes them.
local p = redis.call('HMGET', KEYS[2], 'cap', 'closed')
if not p[1] then return -2 end
local again = redis.call('HGET', KEYS[3], ARGV[3])
if again then return cmsgpack.unpack(again) end
local first = 6 + tonumber(ARGV[5])
restore(6, first - 1)
forget(first, #ARGV)
local len = redis.call('LLEN', KEYS[1])
if len == 0 then
  if p[2] == '1' then return -1 end
  return {}
end
local out = redis.call('LPOP', KEYS[1], math.min(len, tonumber(ARGV[2])))
redis.call('HSET', KEYS[3], ARGV[3], cmsgpack.pack(out))
redis.call('PEXPIRE', KEYS[3], ARGV[4])
if len >= tonumber(p[1]) then redis.call('PUBLISH', ARGV[1], 'm') end
return out
