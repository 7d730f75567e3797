-- sem_open: create the semaphore with a capacity, or check the stored one.
-- KEYS: as in sem_common.lua
-- ARGV[1] capacity
-- Returns 1, or -1 when another capacity is stored.
if not capacity(tonumber(ARGV[1])) then return -1 end
return 1
