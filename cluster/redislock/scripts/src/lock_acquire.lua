-- lock_acquire: take the lock in a mode now, or join the FIFO queue.
-- KEYS: as in lock_common.lua
-- ARGV[1] hold id (unique per acquisition), ARGV[2] mode "w" or "r",
-- ARGV[3] lease TTL ms, ARGV[4] meta "pid host",
-- ARGV[5] wake channel; "" means do not queue (try-lock)
-- Returns {1, token} when held, {0, 0} otherwise, {-1, 0} when the marker
-- is missing.
local id, mode, ttl, meta, ch = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
-- The server lost its data (or is new): grant nothing (restart.go).
if redis.call('EXISTS', KEYS[8]) == 0 then return {-1, 0} end
-- Fast path: the name has no holder and no waiter.
if redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[3]) == 0 then
  local tok = grant(id, mode, ttl, meta)
  redis.call('PEXPIRE', KEYS[1], ttl + 1000)
  redis.call('PEXPIRE', KEYS[2], ttl + 1000)
  return {1, tok}
end
-- @prelude
prune_holders()
handoff()
local tok = grant_now(id, mode, ttl, meta)
if tok then
  tidy()
  return {1, tok}
end
if ch ~= '' then enqueue(id, mode, ttl, ch, meta) end
tidy()
return {0, 0}
