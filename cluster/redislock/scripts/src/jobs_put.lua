-- jobs_put: add jobs, all in one script so that a batch is atomic.
-- KEYS: as in jobs_common.lua
-- ARGV[1] the channel claimants listen on
-- ARGV[2+4i..5+4i] per job: payload, key ("" for none), delay ms, max attempts
-- Returns the job ids (strings), the pending job's for a key already pending.
-- @prelude
-- Delayed jobs whose time came go first: they were ready before these.
promote()
local out, added = {}, false
for i = 0, (#ARGV - 1) / 4 - 1 do
  local p, k, d, m = ARGV[2 + 4 * i], ARGV[3 + 4 * i], tonumber(ARGV[4 + 4 * i]), tonumber(ARGV[5 + 4 * i])
  local id = k ~= '' and redis.call('HGET', UNIQ, k)
  if not id then
    id = fmt(redis.call('INCR', IDS))
    redis.call('HSET', DATA, id, p)
    local j = {a = 0, m = m, s = 0, k = k}
    if d > 0 then
      redis.call('ZADD', DELAYED, now + d, id)
      set_info(id, j)
    else
      make_ready(id, j, false)
    end
    if k ~= '' then redis.call('HSET', UNIQ, k, id) end
    added = true
  end
  out[#out + 1] = id
end
-- A delayed job is announced too: waiters set their timers to its time.
if added then redis.call('PUBLISH', ARGV[1], '1') end
return out
