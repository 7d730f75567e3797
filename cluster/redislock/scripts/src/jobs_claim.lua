-- jobs_claim: claim up to n ready jobs, oldest first, after giving back
-- the claims whose lease passed and making ready the delayed jobs whose
-- time came.
-- KEYS: as in jobs_common.lua
-- ARGV[1] n, ARGV[2] lease TTL ms
-- Returns {wait, id, payload, attempt, max attempts, token, ...}: wait is,
-- when nothing was claimed, the ms until the next delayed job is ready or
-- the next lease passes (-1: none), else 0.
-- @prelude
reclaim()
promote()
local ids = redis.call('ZRANGE', READY, 0, tonumber(ARGV[1]) - 1)
local out = {0}
for _, id in ipairs(ids) do
  redis.call('ZREM', READY, id)
  local j = info(id)
  j.a = j.a + 1
  set_info(id, j)
  -- A missing counter (a new queue, or a server that lost its data)
  -- starts at the server clock in microseconds, so that tokens keep
  -- growing across such a loss unless the clock goes back.
  local tok = redis.call('INCR', TOKEN)
  if tok == 1 then
    tok = tonumber(t[1]) * 1000000 + tonumber(t[2])
    redis.call('SET', TOKEN, fmt(tok))
  end
  redis.call('ZADD', INFLIGHT, now + tonumber(ARGV[2]), id)
  redis.call('HSET', CLAIM, id, fmt(tok))
  local n = #out
  out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] =
    id, redis.call('HGET', DATA, id) or '', j.a, j.m, fmt(tok)
end
if #ids == 0 then
  local w = -1
  for _, z in ipairs({DELAYED, INFLIGHT}) do
    local first = redis.call('ZRANGE', z, 0, 0, 'WITHSCORES')
    if first[2] then
      local d = math.max(1, tonumber(first[2]) - now + 1)
      if w < 0 or d < w then w = d end
    end
  end
  out[1] = w
end
return out
