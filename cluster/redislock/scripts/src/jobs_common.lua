-- Prelude of the work queue scripts (jobs_*.lua). Every key of a queue
-- shares one Cluster hash tag; none expires (a queue lasts until its keys
-- are removed), so the token counter never restarts while the queue exists.
-- The keys come in this order so that a script given only the first ones
-- has those it can touch: the ack script the first 4, or 5 for a job with
-- a uniqueness key (jobsKeysAck; it has no prelude and names them itself),
-- the claim script the first 11 (jobsKeysClaim), the others all. The order
-- is the scripts' alone: the keys' names and contents do not depend on it.
-- KEYS[1]  inflight zset    job id -> lease deadline of its claim (server ms)
-- KEYS[2]  claim    hash    job id -> token of its current claim
-- KEYS[3]  data     hash    job id -> payload
-- KEYS[4]  info     hash    job id -> "attempts|max attempts|ready sequence|key"
-- KEYS[5]  uniq     hash    uniqueness key -> id of the pending job
-- KEYS[6]  ready    zset    job id -> ready sequence (claimed lowest first)
-- KEYS[7]  delayed  zset    job id -> ready time (server ms)
-- KEYS[8]  token    string  fencing token counter
-- KEYS[9]  dead     zset    job id -> time of death (server ms)
-- KEYS[10] reason   hash    job id -> reason of its death
-- KEYS[11] waiters  string  server ms until which a claimant may wait on the
--                           queue's channel (expires then): a Put announces
--                           itself only before that
-- KEYS[12] seq      string  last ready sequence: the server's ms * SEQ_MS when
--                           it was drawn, or one more than the last if that
--                           is greater (so it always grows), so that a ready
--                           job's sequence says since when it is in line
--                           (queues made before that hold small counts)
-- KEYS[13] ids      string  job id counter
local t = redis.call('TIME')
-- nows is the server's ms as a string, made of TIME's seconds and the
-- first three of its six microsecond digits: a number formatted costs more.
local nows = t[1] .. string.sub('00000' .. t[2], -6, -4)
local now = tonumber(nows)
local INFLIGHT, CLAIM, DATA, INFO, UNIQ, READY, DELAYED, TOKEN, DEAD, REASON, WAITERS, SEQ, IDS = unpack(KEYS)

-- Numbers go to the server as decimal strings, constants as string
-- literals: the server formats a Lua number as a double, which costs more
-- than most commands do.
local function fmt(n) return string.format('%d', n) end

-- SEQ_MS sequences per ms; sequences stay below 2^53 (exact in a double,
-- as zset scores are) until the year 2248.
local SEQ_MS = 1024

-- INFO_RE splits an info value: attempts, max attempts, sequence, key.
local INFO_RE = '^(%d+)|(%d+)|(%d+)|(.*)$'
-- @end head

local function info(id)
  local v = redis.call('HGET', INFO, id)
  if not v then return nil end
  local a, m, s, k = string.match(v, INFO_RE)
  return {a = tonumber(a), m = tonumber(m), s = tonumber(s), k = k}
end

local function set_info(id, j)
  redis.call('HSET', INFO, id, fmt(j.a) .. '|' .. fmt(j.m) .. '|' .. fmt(j.s) .. '|' .. j.k)
end

-- make_ready puts a job in line: at the back with a new sequence, or, when
-- given back (keep), where it stood before it was claimed.
local function make_ready(id, j, keep)
  if not keep then
    j.s = math.max((tonumber(redis.call('GET', SEQ)) or 0) + 1, now * SEQ_MS)
    redis.call('SET', SEQ, fmt(j.s))
  end
  redis.call('ZADD', READY, j.s, id)
  set_info(id, j)
end

local function free_key(id, j)
  if j.k ~= '' and redis.call('HGET', UNIQ, j.k) == id then redis.call('HDEL', UNIQ, j.k) end
end

-- bury makes a job a dead letter: its key is free again.
local function bury(id, j, reason)
  redis.call('ZADD', DEAD, now, id)
  redis.call('HSET', REASON, id, reason)
  free_key(id, j)
end

-- forget deletes a job acked or purged.
local function forget(id, j)
  free_key(id, j)
  redis.call('HDEL', DATA, id)
  redis.call('HDEL', INFO, id)
  redis.call('HDEL', REASON, id)
end

-- give_back ends the claim of a job (its attempt counted): in line again
-- where it stood, or dead when that was its last attempt.
local function give_back(id, why)
  redis.call('ZREM', INFLIGHT, id)
  redis.call('HDEL', CLAIM, id)
  local j = info(id)
  if not j then return end
  if j.a >= j.m then bury(id, j, why) else make_ready(id, j, true) end
end

-- reclaim gives back the claims whose lease passed (up to 100 a call).
local function reclaim()
  local ids = redis.call('ZRANGEBYSCORE', INFLIGHT, '-inf', now, 'LIMIT', 0, 100)
  for _, id in ipairs(ids) do give_back(id, 'claim lease expired on its last attempt') end
end

-- promote makes the delayed jobs whose time came ready, each in line as
-- of its time: ahead of the jobs put or given back since, which therefore
-- need not promote first.
local function promote()
  local ds = redis.call('ZRANGEBYSCORE', DELAYED, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 1000)
  for i = 1, #ds, 2 do
    local id = ds[i]
    redis.call('ZREM', DELAYED, id)
    local j = info(id)
    if j then
      j.s = tonumber(ds[i + 1]) * SEQ_MS
      make_ready(id, j, true)
    end
  end
end

-- claim_ok reports whether the job's current claim has token tok.
local function claim_ok(id, tok)
  return redis.call('HGET', CLAIM, id) == tok
end
