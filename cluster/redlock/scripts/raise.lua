-- rl_raise: raise the token counter to at least a token, so that any later
-- majority, which shares a node with this one, draws a greater token.
-- KEYS[1] token counter
-- ARGV[1] token, ARGV[2] lease TTL ms
-- Returns 1.
-- Raising a counter keeps its expiry rule (rl_acquire.lua): it goes a TTL
-- after the later of now and the instant this node's clock passes it.
local function keep(key, n, ttl)
  local t = redis.call('TIME')
  local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('PEXPIREAT', key, math.max(ms, math.ceil(n / 1000)) + ttl)
end
local c = tonumber(redis.call('GET', KEYS[1]) or '0')
if c < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
  keep(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]))
end
return 1
