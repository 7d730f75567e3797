-- jobs_ack: the job of a claim is done; it leaves the queue.
-- @alone
-- KEYS[1] inflight, KEYS[2] claim, KEYS[3] data, KEYS[4] info, and for a
-- job with a uniqueness key KEYS[5] uniq (the first keys of
-- jobs_common.lua)
-- ARGV[1] job id, ARGV[2] token of the claim, ARGV[3] the job's uniqueness
-- key as the claim script returned it, absent for none (a job's key never
-- changes)
-- Returns 1, or 0 when the claim is no longer the caller's (lost).
-- The script reads no clock and gives no lapsed claim back: a claim gives
-- them back before it takes a job, so that a claim whose lease passed is
-- lost once another claimant could have it, and the ack of one that no
-- claim looked at since is taken, as its job was nobody else's.
local id = ARGV[1]
if redis.call('HGET', KEYS[2], id) ~= ARGV[2] then return 0 end
redis.call('ZREM', KEYS[1], id)
redis.call('HDEL', KEYS[2], id)
local key = ARGV[3]
if key and redis.call('HGET', KEYS[5], key) == id then redis.call('HDEL', KEYS[5], key) end
-- A claimed job has no reason of death to delete.
redis.call('HDEL', KEYS[3], id)
redis.call('HDEL', KEYS[4], id)
return 1
