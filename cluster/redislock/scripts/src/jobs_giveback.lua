-- jobs_giveback: give back claims of a handle being closed, each in line
-- again where it stood (or dead after its last attempt).
-- KEYS: as in jobs_common.lua
-- ARGV[1] the channel claimants listen on, ARGV[2..] pairs of job id and
-- token of its claim
-- Returns how many were still the handle's.
-- @prelude
local n = 0
for i = 2, #ARGV, 2 do
  if claim_ok(ARGV[i], ARGV[i + 1]) then
    give_back(ARGV[i], 'claim given back on its last attempt')
    n = n + 1
  end
end
if n > 0 then redis.call('PUBLISH', ARGV[1], '1') end
return n
