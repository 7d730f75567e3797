-- rl_extend: extend this node's lease of one hold, and raise the token
-- counter to at least the hold's token.
-- KEYS[1] lock key, KEYS[2] token counter
-- ARGV[1] hold id, ARGV[2] lease TTL ms, ARGV[3] token of the hold
-- Returns 1 when extended, 0 when this node no longer has the hold.
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. '|' then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
-- Raising a counter keeps its expiry rule (rl_acquire.lua): it goes a TTL
-- after the later of now and the instant this node's clock passes it.
local function keep(key, n, ttl)
  local t = redis.call('TIME')
  local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('PEXPIREAT', key, math.max(ms, math.ceil(n / 1000)) + ttl)
end
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
if c < tonumber(ARGV[3]) then
  redis.call('SET', KEYS[2], ARGV[3])
  keep(KEYS[2], tonumber(ARGV[3]), tonumber(ARGV[2]))
end
return 1
