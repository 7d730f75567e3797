-- jobs_ackmany: the acks of several claims, gathered (see jobs_gather.go);
-- each as jobs_ack.lua does it.
-- @alone
-- KEYS[1] inflight, KEYS[2] claim, KEYS[3] data, KEYS[4] info, KEYS[5] uniq
-- (the first keys of jobs_common.lua)
-- ARGV[3i+1..3i+3] per claim: job id, token of the claim, the job's
-- uniqueness key as the claim script returned it ("" for none)
-- Returns per claim 1, or 0 when the claim is no longer the caller's.
local out, ids = {}, {}
for i = 1, #ARGV, 3 do
  local id, key = ARGV[i], ARGV[i + 2]
  if redis.call('HGET', KEYS[2], id) == ARGV[i + 1] then
    ids[#ids + 1] = id
    if key ~= '' and redis.call('HGET', KEYS[5], key) == id then redis.call('HDEL', KEYS[5], key) end
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
if #ids > 0 then
  redis.call('ZREM', KEYS[1], unpack(ids))
  redis.call('HDEL', KEYS[2], unpack(ids))
  -- A claimed job has no reason of death to delete.
  redis.call('HDEL', KEYS[3], unpack(ids))
  redis.call('HDEL', KEYS[4], unpack(ids))
end
return out
