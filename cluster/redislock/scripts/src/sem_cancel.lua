-- sem_cancel: a waiter gives up; permits handed to it meanwhile go back.
-- KEYS: as in sem_common.lua
-- ARGV[1] hold id, ARGV[2] capacity
-- Returns 1.
local id = ARGV[1]
remove_waiter(id)
redis.call('ZREM', KEYS[1], id)
redis.call('HDEL', KEYS[2], id)
prune_holders()
local cap = capacity(tonumber(ARGV[2]))
if cap then handoff(cap) end
tidy_sem()
return 1
