-- mutex_cancel: a waiter gives up. Removes its entry from the line, gives
-- back the lock if it was handed to it meanwhile, and passes the lock on.
-- KEYS: as in mutex_common.lua
-- ARGV as in mutex_acquire.lua (the entry is found by its whole text)
-- Returns 1.
local id, ttl, meta, ch = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[5]
-- @prelude
if redis.call('ZREM', KEYS[4], id) == 1 then
  redis.call('LREM', KEYS[3], 1, entry(id, ttl, ch, meta))
end
if owner_token(id) then redis.call('DEL', KEYS[1]) end
handoff()
return 1
