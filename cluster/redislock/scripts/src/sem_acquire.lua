-- sem_acquire: take n permits now, or join the FIFO queue.
-- KEYS: as in sem_common.lua
-- ARGV[1] hold id, ARGV[2] n, ARGV[3] lease TTL ms, ARGV[4] meta,
-- ARGV[5] wake channel ("" means do not queue), ARGV[6] capacity
-- Returns 1 when held, 0 when not, -1 when another capacity is stored, -2
-- when the marker is missing.
local id, n, ttl, meta, ch = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], ARGV[5]
local refused, cap, u = admit(tonumber(ARGV[6]))
if refused then return refused end
if redis.call('ZCARD', KEYS[3]) == 0 and u + n <= cap then
  grant(id, n, ttl, meta)
  tidy_sem()
  return 1
end
if ch ~= '' then enqueue(id, n, ttl, ch, meta) end
tidy_sem()
return 0
