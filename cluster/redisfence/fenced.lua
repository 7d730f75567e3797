-- A write refused to a token lower than the highest one accepted before.
-- KEYS[1]  the fence key: the highest token accepted, in decimal
-- KEYS[2]  the key the command writes
-- ARGV[1]  the token, in decimal (1 to 2^64-1)
-- ARGV[2]  the command, then its arguments after the key (ARGV[3]...)
-- Returns {1, the command's reply} once it ran, or {0, highest} when the
-- token is stale. A command that fails leaves the fence key as it was.
local cur = redis.call('GET', KEYS[1])
if cur then
  if not string.match(cur, '^%d+$') or #cur > 20 then
    return redis.error_reply('ERR fence key ' .. KEYS[1] .. ' holds no token')
  end
  -- Tokens go up to 2^64 and Lua numbers are doubles: compare the
  -- zero-padded decimals in halves of 10 digits, each exact in a double.
  local t = string.rep('0', 20 - #ARGV[1]) .. ARGV[1]
  local c = string.rep('0', 20 - #cur) .. cur
  local th, ch = tonumber(string.sub(t, 1, 10)), tonumber(string.sub(c, 1, 10))
  if th < ch or (th == ch and tonumber(string.sub(t, 11)) < tonumber(string.sub(c, 11))) then
    return {0, cur}
  end
end
local reply = redis.call(ARGV[2], KEYS[2], unpack(ARGV, 3))
if cur ~= ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1])
end
return {1, reply}
