-- jobs_requeue: make dead letters ready again, attempts counted from zero.
-- A dead letter whose key another pending job has taken stays dead.
-- KEYS: as in jobs_common.lua
-- ARGV[1] the channel claimants listen on, ARGV[2..] job ids
-- Returns how many were requeued.
-- @prelude
local n = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  local j = redis.call('ZSCORE', DEAD, id) and info(id)
  if j then
    local other = j.k ~= '' and redis.call('HGET', UNIQ, j.k)
    if not other then
      if j.k ~= '' then redis.call('HSET', UNIQ, j.k, id) end
      redis.call('ZREM', DEAD, id)
      redis.call('HDEL', REASON, id)
      j.a = 0
      make_ready(id, j, false)
      n = n + 1
    end
  end
end
if n > 0 then redis.call('PUBLISH', ARGV[1], '1') end
return n
