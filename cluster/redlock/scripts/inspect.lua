-- rl_inspect: read one Redlock node's state of a lock.
-- KEYS[1] lock key, KEYS[2] token counter
-- Returns {value of the lock key ("" if none), ms left on its lease,
-- counter ("" if none)}.
return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]) or ''}
