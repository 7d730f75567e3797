-- jobs_inspect: what baton status shows of a queue, changing nothing.
-- KEYS: as in jobs_common.lua
-- Returns {exists, now ms, ready, delayed, in flight, dead, last token,
-- id, lease deadline ms, token, ...} with up to 100 claims, the
-- soonest to lapse first; exists is 0 when the queue has no key.
-- @prelude
if redis.call('EXISTS', IDS) == 0 and redis.call('EXISTS', TOKEN) == 0 then return {0} end
local due = redis.call('ZCOUNT', DELAYED, '-inf', now)
local out = {1, now, redis.call('ZCARD', READY) + due, redis.call('ZCARD', DELAYED) - due,
  redis.call('ZCARD', INFLIGHT), redis.call('ZCARD', DEAD), redis.call('GET', TOKEN) or ''}
local cs = redis.call('ZRANGE', INFLIGHT, 0, 99, 'WITHSCORES')
for i = 1, #cs, 2 do
  local n = #out
  out[n + 1], out[n + 2], out[n + 3] = cs[i], cs[i + 1], redis.call('HGET', CLAIM, cs[i]) or ''
end
return out
