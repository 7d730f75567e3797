-- rate_step: one step of the generic cell rate algorithm on a limit.
-- KEYS: as in rate_common.lua
-- ARGV[1] the step: 0 allow, 1 reserve, 2 cancel, 3 set
-- ARGV[2], ARGV[3], ARGV[4] the caller's rate, period (ns) and burst
-- ARGV[5] the time one event takes, in microseconds
-- ARGV[6] the number of events (allow 0: check the limit, store it if new)
-- ARGV[7] cancel: the reserved time, in microseconds
-- Returns {0, rate, period, burst} when the stored limit is another (set
-- excepted), else {1, allowed (0 or 1), wait, remaining, now}: wait is
-- the time until the events are admitted (allow refused) or may be used
-- (reserve), in microseconds.
local op = tonumber(ARGV[1])
local cur = redis.call('HMGET', KEYS[1], 'r', 'p', 'b', 't')
local exists = cur[1] ~= false
if exists and op ~= 3 and (cur[1] ~= ARGV[2] or cur[2] ~= ARGV[3] or cur[3] ~= ARGV[4]) then
  return {0, cur[1], cur[2], cur[3]}
end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local iv, n = tonumber(ARGV[5]), tonumber(ARGV[6])
local tau = iv * tonumber(ARGV[4])
local stored = tonumber(cur[4] or '0')
local tat = math.max(stored, now)
local allowed, wait, nxt = 0, 0, nil
if op == 0 then
  if n == 0 then
    if not exists then
      nxt = 0
    end
  else
    local new = tat + n * iv
    if new - tau > now then
      wait = new - tau - now
    else
      allowed, nxt = 1, new
    end
  end
elseif op == 1 then
  nxt = tat + n * iv
  wait = math.max(0, nxt - tau - now)
elseif op == 2 then
  if tonumber(ARGV[7]) > now and stored > now then
    nxt = math.max(now, stored - n * iv)
  end
else
  nxt = stored
end
if nxt then
  if exists and op ~= 3 then -- the parameters stored are these: only the time moves
    redis.call('HSET', KEYS[1], 't', string.format('%.0f', nxt))
  else
    redis.call('HSET', KEYS[1], 'r', ARGV[2], 'p', ARGV[3], 'b', ARGV[4], 't', string.format('%.0f', nxt))
  end
  tat = math.max(nxt, now)
end
local remaining = math.max(0, math.floor((now + tau - tat) / iv))
-- Whole numbers below 2^53: Redis replies them as integers, exactly.
return {1, allowed, wait, remaining, now}
