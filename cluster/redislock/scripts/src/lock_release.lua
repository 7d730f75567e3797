-- lock_release: compare-and-delete of one hold, then handoff to the head of
-- the queue.
-- KEYS: as in lock_common.lua
-- ARGV[1] hold id, ARGV[2] "w" when the hold is exclusive (optional)
-- Returns 1 when the hold was released, 0 when it was not held (lost).
local id = ARGV[1]
-- Fast path: the only holder, no waiter.
local exp = redis.call('ZSCORE', KEYS[1], id)
if exp and tonumber(exp) > now and (ARGV[2] == 'w' or redis.call('ZCARD', KEYS[1]) == 1)
    and redis.call('EXISTS', KEYS[3]) == 0 then
  -- An exclusive holder is the only live one; expired entries go too.
  redis.call('DEL', KEYS[1], KEYS[2])
  return 1
end
-- @prelude
prune_holders()
if not redis.call('ZSCORE', KEYS[1], id) then
  tidy()
  return 0
end
redis.call('ZREM', KEYS[1], id)
redis.call('HDEL', KEYS[2], id)
handoff()
tidy()
return 1
