-- chan_open: create the channel's parameters, or read those that exist.
-- KEYS: as in chan_common.lua
-- ARGV[1] capacity asked (0: the existing one, or ARGV[3] for a new channel)
-- ARGV[2] largest message asked (0: the existing one, or ARGV[4])
-- ARGV[5] '1' for a one-to-one channel, '0' for the existing kind (or
-- many-to-many for a new channel)
-- Returns {capacity, largest message, one-to-one (0 or 1)} of the
-- channel; the caller compares.
local p = redis.call('HMGET', KEYS[2], 'cap', 'max', 'one')
if p[1] and p[2] then
  return {tonumber(p[1]), tonumber(p[2]), tonumber(p[3] or '0')}
end
local cap, max = tonumber(ARGV[1]), tonumber(ARGV[2])
if cap == 0 then cap = tonumber(ARGV[3]) end
if max == 0 then max = tonumber(ARGV[4]) end
redis.call('HSET', KEYS[2], 'cap', cap, 'max', max, 'closed', '0', 'one', ARGV[5])
return {cap, max, tonumber(ARGV[5])}
