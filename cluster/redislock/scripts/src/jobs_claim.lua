-- jobs_claim: claim up to n ready jobs, oldest first, after giving back
-- the claims whose lease passed and making ready the delayed jobs whose
-- time came.
-- KEYS: as in jobs_common.lua
-- ARGV[1] n, ARGV[2] lease TTL ms, ARGV[3] when nothing is ready, the ms
-- the caller may wait on the queue's channel before it looks again (0: it
-- does not wait)
-- Returns {wait, id, payload, info, token, ...}, a job's fields as
-- strings: wait is, when nothing was claimed, the ms until the next
-- delayed job is ready or the next lease passes (-1: none), else 0; info
-- is the job's info as the claim left it (attempts counting this one, max
-- attempts, sequence, key), which the caller splits: the key goes back to
-- the ack script, so that it need not read the job's info to free it.
-- Only when a lease passed or a delayed job is due does the script define
-- the functions that deal with them.
-- ZCOUNT answers with a number, which the script receives for less than
-- a list.
if redis.call('ZCOUNT', INFLIGHT, '-inf', nows) > 0
  or redis.call('ZCOUNT', DELAYED, '-inf', nows) > 0 then
  -- @prelude
  reclaim()
  promote()
end
-- ZPOPMIN takes the first n in line as ZRANGE and ZREM did, in one command.
local z = redis.call('ZPOPMIN', READY, ARGV[1])
local k = #z / 2
if k > 0 then
  -- A missing counter (a new queue, or a server that lost its data)
  -- starts at the server clock in microseconds, so that tokens keep
  -- growing across such a loss unless the clock goes back.
  local tok = redis.call('INCRBY', TOKEN, k == 1 and '1' or fmt(k))
  if tok == k then
    tok = tonumber(t[1]) * 1000000 + tonumber(t[2]) + k - 1
    redis.call('SET', TOKEN, fmt(tok))
  end
  local deadline = fmt(now + ARGV[2])
  if k == 1 then
    -- One job, the common claim: its commands take it alone, with no
    -- tables to build for them.
    local id = z[1]
    local a, rest = string.match(redis.call('HGET', INFO, id), '^(%d+)(.*)$')
    local info, ts = fmt(a + 1) .. rest, fmt(tok)
    redis.call('HSET', INFO, id, info)
    redis.call('ZADD', INFLIGHT, deadline, id)
    redis.call('HSET', CLAIM, id, ts)
    return {0, id, redis.call('HGET', DATA, id) or '', info, ts}
  end
  tok = tok - k
  local ids = {}
  for i = 1, k do ids[i] = z[2 * i - 1] end
  local infos = redis.call('HMGET', INFO, unpack(ids))
  local data = redis.call('HMGET', DATA, unpack(ids))
  local out, iset, lset, cset = {0}, {}, {}, {}
  for i, id in ipairs(ids) do
    local a, rest = string.match(infos[i], '^(%d+)(.*)$')
    local info = fmt(a + 1) .. rest
    tok = tok + 1
    local ts = fmt(tok)
    iset[2 * i - 1], iset[2 * i] = id, info
    lset[2 * i - 1], lset[2 * i] = deadline, id
    cset[2 * i - 1], cset[2 * i] = id, ts
    local n = #out
    out[n + 1], out[n + 2], out[n + 3], out[n + 4] = id, data[i] or '', info, ts
  end
  redis.call('HSET', INFO, unpack(iset))
  redis.call('ZADD', INFLIGHT, unpack(lset))
  redis.call('HSET', CLAIM, unpack(cset))
  return out
end
local w = -1
for _, z in ipairs({DELAYED, INFLIGHT}) do
  local first = redis.call('ZRANGE', z, '0', '0', 'WITHSCORES')
  if first[2] then
    local d = math.max(1, tonumber(first[2]) - now + 1)
    if w < 0 or d < w then w = d end
  end
end
local wait = tonumber(ARGV[3])
if wait > 0 and tonumber(redis.call('GET', WAITERS) or 0) < now + wait then
  redis.call('SET', WAITERS, fmt(now + wait), 'PX', ARGV[3])
end
return {w}
