-- mutex_acquire: take the Mutex now, or join the FIFO line of waiters.
-- KEYS: as in mutex_common.lua
-- ARGV[1] hold id (unique per acquisition), ARGV[2] lease TTL ms,
-- ARGV[3] meta "pid host", ARGV[4] the client's clock in ms (the start
-- shown by inspection), ARGV[5] wake channel; "" means do not queue
-- (try-lock)
-- Returns {1, token} when held, {0, 0} otherwise, {-1, 0} when the marker
-- is missing.
local id, ttl, meta, ch = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[5]
-- One MGET reads the marker, the hold, lwait (which exists while anyone
-- may wait, and holds the expiry of the line's keys: mutex_common.lua) and
-- the token counter.
local v = redis.call('MGET', KEYS[6], KEYS[1], KEYS[5], KEYS[2])
-- The server lost its data (or is new): grant nothing (restart.go).
if not v[1] then return {-1, 0} end
-- Fast path: no holder and no waiter: four commands, two of them writes
-- (the counter and the hold).
if not v[2] and not v[3] then
  local tok, s = next_token(ttl, nil, v[4])
  redis.call('SET', KEYS[1], id .. '|' .. s .. '|' .. ARGV[4] .. '|' .. meta, 'PX', ttl)
  return {1, tok}
end
-- @prelude
-- Held: nothing to hand over. Not held after the handoff: nobody waits
-- either.
if not v[2] and not handoff() then
  return {1, grant(id, ttl, meta, v[4])} -- no handoff: the counter is as read
end
if ch ~= '' then enqueue(id, ttl, ch, meta, v[3] or false) end
return {0, 0}
