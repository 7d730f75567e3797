-- rl_acquire: take the lock on one Redlock node (SET NX PX) and draw a token.
-- KEYS[1] lock key (string: "hold id|since ms|meta"), KEYS[2] token counter
-- ARGV[1] hold id, ARGV[2] lease TTL ms, ARGV[3] meta
-- Returns {1, token} when taken, {0, ms left on the holder's lease} otherwise.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local v = ARGV[1] .. '|' .. string.format('%d', now) .. '|' .. ARGV[3]
if not redis.call('SET', KEYS[1], v, 'NX', 'PX', ARGV[2]) then
  return {0, redis.call('PTTL', KEYS[1])}
end
-- A missing counter starts at the server clock in microseconds (see
-- lock_common.lua).
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('SET', KEYS[2], string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2])))
end
return {1, redis.call('INCR', KEYS[2])}
