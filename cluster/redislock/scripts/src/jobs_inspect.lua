-- jobs_inspect: what baton status shows of a queue, changing nothing.
-- KEYS: as in jobs_common.lua
-- Returns {exists, now ms, ready, delayed, in flight, dead, last token,
-- oldest ready ms, id, lease deadline ms, token, ...} with up to 100
-- claims, the soonest to lapse first; exists is 0 when the queue has no
-- key. The oldest ready job is the first in line (its sequence says since
-- when, see jobs_common.lua) or a delayed job that is due, whichever came
-- first; -1 when none is ready or the first in line predates timed
-- sequences.
-- @prelude
if redis.call('EXISTS', IDS) == 0 and redis.call('EXISTS', TOKEN) == 0 then return {0} end
local due = redis.call('ZCOUNT', DELAYED, '-inf', now)
local out = {1, now, redis.call('ZCARD', READY) + due, redis.call('ZCARD', DELAYED) - due,
  redis.call('ZCARD', INFLIGHT), redis.call('ZCARD', DEAD), redis.call('GET', TOKEN) or ''}
local oldest = -1
local head = redis.call('ZRANGE', READY, 0, 0, 'WITHSCORES')
if #head == 2 and tonumber(head[2]) >= 2^40 then oldest = math.max(0, now - math.floor(tonumber(head[2]) / SEQ_MS)) end
local first = redis.call('ZRANGEBYSCORE', DELAYED, '-inf', now, 'LIMIT', 0, 1, 'WITHSCORES')
if #first == 2 and (#head == 0 or oldest >= 0) then oldest = math.max(oldest, now - tonumber(first[2])) end
out[#out + 1] = oldest
local cs = redis.call('ZRANGE', INFLIGHT, 0, 99, 'WITHSCORES')
for i = 1, #cs, 2 do
  local n = #out
  out[n + 1], out[n + 2], out[n + 3] = cs[i], cs[i + 1], redis.call('HGET', CLAIM, cs[i]) or ''
end
return out
