-- jobs_ack: the job of a claim is done; it leaves the queue.
-- KEYS: as in jobs_common.lua
-- ARGV[1] job id, ARGV[2] token of the claim, ARGV[3] the job's uniqueness
-- key as the claim script returned it ("" for none: a job's key never
-- changes)
-- Returns 1, or 0 when the claim is no longer the caller's (lost).
-- Only when a lease passed does the script define the functions that
-- give claims back.
if redis.call('ZRANGEBYSCORE', INFLIGHT, '-inf', nows, 'LIMIT', '0', '1')[1] then
  -- @prelude
  reclaim()
end
local id = ARGV[1]
if redis.call('HGET', CLAIM, id) ~= ARGV[2] then return 0 end
redis.call('ZREM', INFLIGHT, id)
redis.call('HDEL', CLAIM, id)
local key = ARGV[3]
if key ~= '' and redis.call('HGET', UNIQ, key) == id then redis.call('HDEL', UNIQ, key) end
-- A claimed job has no reason of death to delete.
redis.call('HDEL', DATA, id)
redis.call('HDEL', INFO, id)
return 1
