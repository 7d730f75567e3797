-- rl_acquire: draw a token and take the lock on one Redlock node (SET NX PX).
-- The counter advances on every attempt, taken or not, so that the
-- counters of nodes that see the same attempts stay equal (see
-- syncCounters in redlock.go).
-- KEYS[1] lock key (string: "hold id|since ms|meta"), KEYS[2] token counter,
-- KEYS[3] waiters (set of the waiters refused since the last release),
-- KEYS[4] marker, set while the node has its data (restart.go)
-- ARGV[1] hold id, ARGV[2] lease TTL ms, ARGV[3] meta, ARGV[4] the client's
-- clock in ms (the start shown by inspection), ARGV[5] the waiter's id when
-- the caller waits for a release after a refusal, else "", ARGV[6] "1" when
-- an earlier attempt of this waiter was refused (it may be in the set)
-- Returns {1, token} when taken, {0, counter, ms left on the holder's
-- lease} otherwise, {-1, 0, 0} when the marker is missing (the node lost
-- its data, or is new): it votes for no one and draws no token.
if redis.call('EXISTS', KEYS[4]) == 0 then return {-1, 0, 0} end
local n = redis.call('INCR', KEYS[2])
local t = redis.call('TIME')
if n == 1 then
  -- A missing counter (new name, reclaimed, or the node lost its data)
  -- starts at the server clock in microseconds.
  n = tonumber(t[1]) * 1000000 + tonumber(t[2]) + 1
  redis.call('SET', KEYS[2], string.format('%d', n))
end
-- The counter goes a TTL after the later of now and the instant this
-- node's clock passes it, so that it starts again above every token it
-- gave: an idle name leaves no key on the node.
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('PEXPIREAT', KEYS[2], math.max(ms, math.ceil(n / 1000)) + tonumber(ARGV[2]))
if not redis.call('SET', KEYS[1], ARGV[1] .. '|' .. ARGV[4] .. '|' .. ARGV[3], 'NX', 'PX', ARGV[2]) then
  if ARGV[5] ~= '' then
    -- A waiter tries again at least every 100 ms (maxRedlockWait), each
    -- time adding itself again, so 2 s outlives every wait between tries.
    redis.call('SADD', KEYS[3], ARGV[5])
    redis.call('PEXPIRE', KEYS[3], 2000)
  end
  return {0, n, redis.call('PTTL', KEYS[1])}
end
if ARGV[6] == '1' then redis.call('SREM', KEYS[3], ARGV[5]) end
return {1, n}
