-- rl_raise: raise the token counter to at least a token, so that any later
-- majority, which shares a node with this one, draws a greater token.
-- KEYS[1] token counter
-- ARGV[1] token
-- Returns 1.
local c = tonumber(redis.call('GET', KEYS[1]) or '0')
if c < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
