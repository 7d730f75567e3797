-- jobs_retry: end a claim as a failed attempt: the job is ready again
-- (after a delay), or dead when that was its last attempt.
-- KEYS: as in jobs_common.lua
-- ARGV[1] job id, ARGV[2] token of the claim, ARGV[3] delay ms (0: now),
-- ARGV[4] reason (kept by a dead letter), ARGV[5] the channel claimants
-- listen on
-- Returns 1, or 0 when the claim is no longer the caller's (lost).
-- @prelude
reclaim()
local id = ARGV[1]
if not claim_ok(id, ARGV[2]) then return 0 end
redis.call('ZREM', INFLIGHT, id)
redis.call('HDEL', CLAIM, id)
local j = info(id)
local d = tonumber(ARGV[3])
if j.a >= j.m then
  bury(id, j, ARGV[4])
  return 1
elseif d > 0 then
  redis.call('ZADD', DELAYED, fmt(now + d), id)
else
  make_ready(id, j, false)
end
redis.call('PUBLISH', ARGV[5], '1')
return 1
