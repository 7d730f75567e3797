-- mutex_acquire: take the Mutex now, or join the FIFO queue.
-- KEYS: as in mutex_common.lua
-- ARGV[1] hold id (unique per acquisition), ARGV[2] lease TTL ms,
-- ARGV[3] meta "pid host", ARGV[4] the client's clock in ms (the start
-- shown by inspection), ARGV[5] wake channel; "" means do not queue
-- (try-lock)
-- Returns {1, token} when held, {0, 0} otherwise, {-1, 0} when the marker
-- is missing.
local id, ttl, meta, ch = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[5]
-- One EXISTS counts the marker three times: 3 is the fast path (marker, no
-- holder, no waiter), less a missing marker, more a holder or waiters.
local e = redis.call('EXISTS', KEYS[7], KEYS[7], KEYS[7], KEYS[1], KEYS[3])
-- The server lost its data (or is new): grant nothing (restart.go).
if e < 3 then return {-1, 0} end
-- Fast path: no holder and no waiter: five commands, two of them writes
-- (the counter and the hold).
if e == 3 then
  local tok, s = next_token(ttl)
  redis.call('SET', KEYS[1], id .. '|' .. s .. '|' .. ARGV[4] .. '|' .. meta, 'PX', ttl)
  return {1, tok}
end
-- @prelude
handoff()
if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('ZCARD', KEYS[3]) == 0 then
  local tok = grant(id, ttl, meta)
  tidy()
  return {1, tok}
end
if ch ~= '' then
  enqueue(id, ttl, ch, meta)
  queue_added(now + ttl, ttl)
else
  tidy()
end
return {0, 0}
