-- jobs_renew: extend the lease of a claim.
-- KEYS: as in jobs_common.lua
-- ARGV[1] job id, ARGV[2] token of the claim, ARGV[3] lease TTL ms
-- Returns 1 when renewed, 0 when the claim is gone or its lease passed.
local exp = redis.call('ZSCORE', INFLIGHT, ARGV[1])
if not exp or tonumber(exp) <= now or redis.call('HGET', CLAIM, ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('ZADD', INFLIGHT, fmt(now + tonumber(ARGV[3])), ARGV[1])
return 1
