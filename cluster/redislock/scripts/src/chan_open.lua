-- chan_open: create the channel's parameters, or read those that exist.
-- KEYS: as in chan_common.lua
-- ARGV[1] capacity asked (0: the existing one, or ARGV[3] for a new channel)
-- ARGV[2] largest message asked (0: the existing one, or ARGV[4])
-- Returns {capacity, largest message} of the channel; the caller compares.
local p = redis.call('HMGET', KEYS[2], 'cap', 'max')
if p[1] and p[2] then
  return {tonumber(p[1]), tonumber(p[2])}
end
local cap, max = tonumber(ARGV[1]), tonumber(ARGV[2])
if cap == 0 then cap = tonumber(ARGV[3]) end
if max == 0 then max = tonumber(ARGV[4]) end
redis.call('HSET', KEYS[2], 'cap', cap, 'max', max, 'closed', '0')
return {cap, max}
