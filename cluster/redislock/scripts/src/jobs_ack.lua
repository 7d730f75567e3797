-- jobs_ack: the job of a claim is done; it leaves the queue.
-- KEYS: as in jobs_common.lua
-- ARGV[1] job id, ARGV[2] token of the claim
-- Returns 1, or 0 when the claim is no longer the caller's (lost).
-- @prelude
reclaim()
if not claim_ok(ARGV[1], ARGV[2]) then return 0 end
redis.call('ZREM', INFLIGHT, ARGV[1])
redis.call('HDEL', CLAIM, ARGV[1])
local j = info(ARGV[1])
if j then forget(ARGV[1], j) end
return 1
