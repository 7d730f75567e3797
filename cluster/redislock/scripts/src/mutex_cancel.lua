-- mutex_cancel: a waiter gives up. Removes its queue entry, gives back the
-- lock if it was handed to it meanwhile, and passes the lock on.
-- KEYS: as in mutex_common.lua
-- ARGV[1] hold id
-- Returns 1.
local id = ARGV[1]
-- @prelude
remove_waiter(id)
if owner_token(id) then redis.call('DEL', KEYS[1]) end
handoff()
tidy()
return 1
