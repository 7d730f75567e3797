-- cond_signal: wake the oldest waiter, or all of them.
-- KEYS: as in cond_common.lua
-- ARGV[1] how many to wake: "1" for Signal, "0" for Broadcast
-- Returns the number woken.
local n = wake(tonumber(ARGV[1]))
tidy()
return n
