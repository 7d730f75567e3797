-- lock_poll: a queued waiter checks in. Refreshes its queue entry, or its
-- lease when the lock was handed to it (the wake-up message may have been
-- lost), and queues it again if its entry expired while it was paused.
-- KEYS: as in lock_common.lua
-- ARGV[1] hold id, ARGV[2] mode, ARGV[3] lease TTL ms, ARGV[4] meta, ARGV[5] wake channel
-- Returns {1, token} when held (lease renewed from now), {0, 0} when still
-- queued, {-1, 0} when the marker is missing.
local id, mode, ttl, meta, ch = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
-- The server lost its data (or is new): grant nothing (restart.go).
if redis.call('EXISTS', KEYS[8]) == 0 then return {-1, 0} end
prune_holders()
handoff()
if redis.call('ZSCORE', KEYS[1], id) then
  redis.call('ZADD', KEYS[1], now + ttl, id)
  local tok = hold_token(id)
  tidy()
  return {1, tok}
end
if redis.call('ZSCORE', KEYS[3], id) then
  redis.call('ZADD', KEYS[4], now + ttl, id)
else
  local tok = grant_now(id, mode, ttl, meta)
  if tok then
    tidy()
    return {1, tok}
  end
  enqueue(id, mode, ttl, ch, meta)
end
tidy()
return {0, 0}
