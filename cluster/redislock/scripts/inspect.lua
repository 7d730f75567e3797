-- inspect: read the state of one lock, semaphore or condition variable.
-- KEYS: every key of the object, in the order of mutex_common.lua,
-- lock_common.lua, sem_common.lua or cond_common.lua
-- ARGV[1] "mutex", "lock", "sem" or "cond"
-- Returns {0} when no key exists, otherwise
-- {1, now ms, live waiters, counter or capacity ("" if none),
--  expiry ms of holder 1, info of holder 1, expiry of holder 2, ...}
-- listing only holders whose lease has not expired.
local t = redis.call('TIME')
local now = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
if redis.call('EXISTS', unpack(KEYS)) == 0 then return {0} end
if ARGV[1] == 'cond' then
  return {1, now, redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf'), ''}
end
if ARGV[1] == 'mutex' then
  local out = {1, now, redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf'), redis.call('GET', KEYS[2]) or ''}
  local v = redis.call('GET', KEYS[1])
  local left = redis.call('PTTL', KEYS[1])
  if v and left > 0 then
    -- "id|token|since|meta" -> "w|token|since|meta", as a lock's info.
    out[#out + 1] = string.format('%d', tonumber(now) + left)
    out[#out + 1] = 'w' .. string.sub(v, (string.find(v, '|', 1, true)))
  end
  return out
end
local out = {1, now, redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf'), redis.call('GET', KEYS[6]) or ''}
local hs = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #hs, 2 do
  out[#out + 1] = hs[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[2], hs[i]) or ''
end
return out
