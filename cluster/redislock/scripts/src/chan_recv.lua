-- chan_recv: take up to ARGV[2] messages from the head of the list.
-- KEYS: as in chan_common.lua
-- ARGV[1] the senders' wake-up channel
-- ARGV[2] the most messages to take (at least 1)
-- Returns the messages taken, oldest first (empty: none), -1 when the
-- channel is closed and empty, -2 when it is gone. Senders wait only on a
-- full list, so only a take from a full list wakes them.
local p = redis.call('HMGET', KEYS[2], 'cap', 'closed')
if not p[1] then return -2 end
local len = redis.call('LLEN', KEYS[1])
if len == 0 then
  if p[2] == '1' then return -1 end
  return {}
end
local out = redis.call('LPOP', KEYS[1], math.min(len, tonumber(ARGV[2])))
if len >= tonumber(p[1]) then redis.call('PUBLISH', ARGV[1], 'm') end
return out
