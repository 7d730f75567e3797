-- jobs_put: add jobs, all in one script so that a batch is atomic.
-- KEYS: data, info, uniq, ready, delayed, waiters, seq and ids of
-- jobs_common.lua, in this order (jobsPutKeys): only those it can touch, so
-- it names them itself after the head.
-- ARGV[1] the channel claimants listen on
-- ARGV[2+4i..5+4i] per job: payload, key ("" for none), delay ms ("0" for
-- none), max attempts
-- Returns the job ids (strings), the pending job's for a key already pending.
-- Delayed jobs whose time came are not made ready here: promote puts them
-- in line as of their time, ahead of these.
-- @head only
DATA, INFO, UNIQ, READY, DELAYED, WAITERS, SEQ, IDS = unpack(KEYS)
local c = redis.call('MGET', IDS, SEQ, WAITERS)
-- seqs is seq as the string to store, kept so that it is formatted once.
local last, seq, seqs = tonumber(c[1]) or 0, tonumber(c[2]) or 0, c[2] or '0'
local out, added = {}, false
for i = 0, (#ARGV - 1) / 4 - 1 do
  local p, k, d, m = ARGV[2 + 4 * i], ARGV[3 + 4 * i], ARGV[4 + 4 * i], ARGV[5 + 4 * i]
  local id = k ~= '' and redis.call('HGET', UNIQ, k)
  if not id then
    last = last + 1
    id = fmt(last)
    redis.call('HSET', DATA, id, p)
    local s = '0'
    if d ~= '0' then
      redis.call('ZADD', DELAYED, fmt(now + d), id)
    else
      seq = math.max(seq + 1, now * SEQ_MS)
      seqs = fmt(seq)
      s = seqs
      redis.call('ZADD', READY, s, id)
    end
    redis.call('HSET', INFO, id, '0|' .. m .. '|' .. s .. '|' .. k)
    if k ~= '' then redis.call('HSET', UNIQ, k, id) end
    added = true
  end
  out[#out + 1] = id
end
if added then
  redis.call('MSET', IDS, fmt(last), SEQ, seqs)
  -- A delayed job is announced too: waiters set their timers to its time.
  if c[3] and tonumber(c[3]) > now then redis.call('PUBLISH', ARGV[1], '1') end
end
return out
