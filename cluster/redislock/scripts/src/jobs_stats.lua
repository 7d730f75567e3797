-- jobs_stats: count the jobs by state, after giving back the claims whose
-- lease passed and making ready the delayed jobs whose time came.
-- KEYS: as in jobs_common.lua
-- Returns {ready, delayed, in flight, dead}.
-- @prelude
reclaim()
promote()
return {redis.call('ZCARD', READY), redis.call('ZCARD', DELAYED), redis.call('ZCARD', INFLIGHT), redis.call('ZCARD', DEAD)}
