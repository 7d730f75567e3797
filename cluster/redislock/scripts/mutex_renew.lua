-- mutex_renew: extend the lease of a Mutex hold.
-- KEYS[1] owner string "hold id|token|since ms|meta"
-- ARGV[1] hold id, ARGV[2] lease TTL ms
-- Returns 1 when renewed, 0 when the hold is gone or expired (lost).
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. '|' then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
