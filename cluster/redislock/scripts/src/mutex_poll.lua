-- mutex_poll: a queued waiter checks in. Refreshes its entry in line, or
-- its lease when the lock was handed to it (the wake-up message may have
-- been lost), and queues it again if its entry was dropped (it expired
-- while the waiter was paused).
-- KEYS: as in mutex_common.lua
-- ARGV as in mutex_acquire.lua
-- Returns {1, token} when held (lease renewed from now), {0, 0} when still
-- queued, {-1, 0} when the marker is missing.
local id, ttl, meta, ch = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[5]
-- The server lost its data (or is new): grant nothing (restart.go).
if redis.call('EXISTS', KEYS[6]) == 0 then return {-1, 0} end
-- @prelude
local held = handoff()
local tok = held and owner_token(id)
if tok then
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {1, tok}
end
if not held then
  -- Not held after the handoff: nobody waits either.
  return {1, grant(id, ttl, meta)}
end
if redis.call('ZSCORE', KEYS[4], id) then
  redis.call('ZADD', KEYS[4], now + ttl, id)
  keep_line(ttl, false)
else
  enqueue(id, ttl, ch, meta)
end
return {0, 0}
