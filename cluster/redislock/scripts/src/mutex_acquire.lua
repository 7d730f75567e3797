-- mutex_acquire: take the Mutex now, or join the FIFO queue.
-- KEYS: as in mutex_common.lua
-- ARGV[1] hold id (unique per acquisition), ARGV[2] lease TTL ms,
-- ARGV[3] meta "pid host", ARGV[4] the client's clock in ms (the start
-- shown by inspection), ARGV[5] wake channel; "" means do not queue
-- (try-lock)
-- Returns {1, token} when held, {0, 0} otherwise, {-1, 0} when the marker
-- is missing.
local id, ttl, meta, ch = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[5]
-- The server lost its data (or is new): grant nothing (restart.go).
if redis.call('EXISTS', KEYS[7]) == 0 then return {-1, 0} end
-- Fast path: no holder and no waiter. Three commands, no clock read.
if redis.call('EXISTS', KEYS[1], KEYS[3]) == 0 then
  local tok = next_token(ttl)
  redis.call('SET', KEYS[1], id .. '|' .. string.format('%d', tok) .. '|' .. ARGV[4] .. '|' .. meta, 'PX', ttl)
  return {1, tok}
end
-- @prelude
handoff()
if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('ZCARD', KEYS[3]) == 0 then
  local tok = grant(id, ttl, meta)
  tidy()
  return {1, tok}
end
if ch ~= '' then enqueue(id, ttl, ch, meta) end
tidy()
return {0, 0}
