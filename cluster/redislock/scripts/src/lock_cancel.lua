-- lock_cancel: a waiter gives up. Removes its queue entry, gives back the
-- lock if it was handed to it meanwhile, and passes the lock on.
-- KEYS: as in lock_common.lua
-- ARGV[1] hold id
-- Returns 1.
local id = ARGV[1]
prune_holders()
remove_waiter(id)
if redis.call('ZSCORE', KEYS[1], id) then
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
end
handoff()
tidy()
return 1
