-- lock_downgrade: turn a write hold into a read hold atomically and admit
-- the readers at the head of the queue.
-- KEYS: as in lock_common.lua
-- ARGV[1] hold id
-- Returns {1, token} on success, {0, 0} when the hold is gone (lost).
local id = ARGV[1]
prune_holders()
local info = redis.call('HGET', KEYS[2], id)
if not redis.call('ZSCORE', KEYS[1], id) or not info then
  tidy()
  return {0, 0}
end
local mode, tok, rest = string.match(info, '^([^|]*)|([^|]*)|(.*)$')
redis.call('HSET', KEYS[2], id, 'r|' .. tok .. '|' .. rest, '!m', 'r')
handoff()
tidy()
return {1, tonumber(tok)}
