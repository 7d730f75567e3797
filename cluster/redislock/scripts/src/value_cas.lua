-- value_cas: write the data if the version is still the caller's.
-- KEYS: as in value_common.lua
-- ARGV[1] the version the caller read (0: never written)
-- ARGV[2] the data
-- ARGV[3] the channel that Wait listens on
-- Returns {1, new version} or {0, the version found}.
-- The new version is above the old and at least the server's clock in
-- microseconds, so versions keep increasing when the hash is lost (a
-- restart without persistence, a failover that lost writes), unless the
-- clock went back.
local cur = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if cur ~= tonumber(ARGV[1]) then
  return {0, string.format('%.0f', cur)}
end
local t = redis.call('TIME')
local v = string.format('%.0f', math.max(cur + 1, tonumber(t[1]) * 1000000 + tonumber(t[2])))
redis.call('HSET', KEYS[1], 'v', v, 'd', ARGV[2])
redis.call('PUBLISH', ARGV[3], v)
return {1, v}
