-- jobs_purge: delete dead letters.
-- KEYS: as in jobs_common.lua
-- ARGV[1..] job ids
-- Returns how many were deleted.
-- @prelude
local n = 0
for i = 1, #ARGV do
  if redis.call('ZREM', DEAD, ARGV[i]) == 1 then
    forget(ARGV[i], {k = ''})
    n = n + 1
  end
end
return n
