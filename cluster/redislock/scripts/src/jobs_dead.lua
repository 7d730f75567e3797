-- jobs_dead: list dead letters, oldest first.
-- KEYS: as in jobs_common.lua
-- ARGV[1] limit
-- Returns {id, payload, attempts, reason, time of death ms, ...}.
-- @prelude
local out = {}
local ds = redis.call('ZRANGE', DEAD, 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
for i = 1, #ds, 2 do
  local id = ds[i]
  local j = info(id)
  local n = #out
  out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] =
    id, redis.call('HGET', DATA, id) or '', j and j.a or 0, redis.call('HGET', REASON, id) or '', ds[i + 1]
end
return out
