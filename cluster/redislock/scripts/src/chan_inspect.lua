-- chan_inspect: read the channel for baton status and ls.
-- KEYS: as in chan_common.lua
-- Returns {} when the channel does not exist, else {capacity, largest
-- message, closed, messages held}.
local p = redis.call('HMGET', KEYS[2], 'cap', 'max', 'closed')
if not p[1] then return {} end
return {tonumber(p[1]), tonumber(p[2]), p[3] or '0', redis.call('LLEN', KEYS[1])}
