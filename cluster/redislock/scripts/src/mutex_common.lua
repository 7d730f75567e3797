-- Prelude of the Mutex scripts (mutex_*.lua). A Mutex has one holder at a
-- time, so its hold is one string key with the lease as its expiry: the
-- uncontended Lock and Unlock touch that key and the counter only. Keys of
-- one name share one Cluster hash tag.
-- KEYS[1] owner    string  "hold id|token|since ms|meta", expires with the lease
-- KEYS[2] counter  string  fencing token counter (expires: next_token)
-- KEYS[3] line     list    "waiter id|ttl ms|wake channel|meta", in arrival
--                          order (FIFO)
-- KEYS[4] lexp     zset    waiter id -> expiry of its entry (server ms); a
--                          waiter is in line while its id is here, and each
--                          id here has one element in line
-- KEYS[5] lwait    string  exists while any waiter entry may: the expiry
--                          (server ms) it and the line's other keys were
--                          given when a waiter was added (keep_line); it is
--                          deleted when a release or a cancel finds the
--                          line empty, so that acquire and release read it,
--                          in the MGET of their fast path, to learn that
--                          nobody waits
-- KEYS[6] marker   string  set while the server has its data (restart.go);
--                          acquire and poll grant nothing without it
-- The line's keys are not those of the queue of earlier versions (queue,
-- qexp, qdata, seq): a process of an earlier version on the same name
-- shares the hold and the counter, so the two exclude each other and
-- tokens keep growing, but neither sees the other's waiters, which take
-- the lock when they next check in (see "Stored format" in redislock.go).

-- next_token draws the token of an acquisition and reserves the 15 after
-- it, which the holder's backend gives when its handles pass the lock among
-- themselves (local.go); it returns the token and its decimal string. c is
-- the server's TIME when the script has read it already, n the counter's
-- value when it has read that (false: missing). A
-- missing counter (new name, reclaimed, or a server restarted without
-- persistence) starts at the server clock in microseconds. The counter
-- expires ttl ms after the later of now and the instant the server clock
-- passes the last token reserved, so that a counter that starts again later
-- starts above every token it gave: an idle name leaves no key behind, and
-- tokens keep growing (see "Fencing tokens" in redislock.go for failover).
-- One SET writes the value and the expiry: a write costs a script more
-- than a read.
local function next_token(ttl, c, n)
  if n == nil then n = redis.call('GET', KEYS[2]) end
  c = c or redis.call('TIME')
  if n then
    n = tonumber(n) + 16
  else
    n = tonumber(c[1]) * 1000000 + tonumber(c[2])
  end
  local ms = tonumber(c[1]) * 1000 + math.floor(tonumber(c[2]) / 1000)
  local s = string.format('%d', n)
  redis.call('SET', KEYS[2], s, 'PXAT', math.max(ms, math.ceil((n + 15) / 1000)) + ttl)
  return n, s
end
-- @end head
-- @prune

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function fmt(n) return string.format('%d', n) end

-- owner_token returns the token of hold id when id holds the lock, else nil.
local function owner_token(id)
  local v = redis.call('GET', KEYS[1])
  if not v or string.sub(v, 1, #id + 1) ~= id .. '|' then return nil end
  return tonumber(string.match(v, '^[^|]*|([^|]*)|'))
end

-- grant makes id the holder; n is the counter as next_token takes it.
local function grant(id, ttl, meta, n)
  local tok, s = next_token(ttl, t, n)
  redis.call('SET', KEYS[1], id .. '|' .. s .. '|' .. fmt(now) .. '|' .. meta, 'PX', ttl)
  return tok
end

-- entry is the element of waiter id in line.
local function entry(id, ttl, ch, meta)
  return id .. '|' .. ttl .. '|' .. ch .. '|' .. meta
end

-- keep_line keeps the line's three keys until a second past the expiry
-- of an entry just added or refreshed (now + ttl). Keys short of that get
-- a TTL more, so that a busy line rewrites their expiries about once a TTL
-- rather than at every arrival. The three are given one expiry, which
-- lwait holds as its value, so that no expiry need be read; but line and
-- lexp go when their last entry does and may be made anew while lwait
-- stays, so an arrival that finds the line empty (fresh) gives them an
-- expiry whatever lwait says. w is lwait's value when read already.
local function keep_line(ttl, fresh, w)
  if w == nil then w = redis.call('GET', KEYS[5]) end
  if fresh or not w or tonumber(w) < now + ttl + 1000 then
    local exp = now + ttl + 1000 + ttl
    redis.call('SET', KEYS[5], exp, 'PXAT', exp)
    redis.call('PEXPIREAT', KEYS[3], exp)
    redis.call('PEXPIREAT', KEYS[4], exp)
  end
end

-- enqueue adds waiter id at the end of the line; w is as for keep_line.
local function enqueue(id, ttl, ch, meta, w)
  local fresh = redis.call('RPUSH', KEYS[3], entry(id, ttl, ch, meta)) == 1
  redis.call('ZADD', KEYS[4], now + ttl, id)
  keep_line(ttl, fresh, w)
end

-- pass_on makes the first live waiter in line the holder and wakes it
-- with a message on its channel, so a release is one round trip. Entries
-- before it, of waiters that expired (died) or were granted meanwhile,
-- are dropped. It reports whether there was a live waiter; the hold it
-- writes replaces any. n is the counter as next_token takes it.
local function pass_on(n)
  while true do
    local e = redis.call('LPOP', KEYS[3])
    if not e then return false end
    local head, ttl, ch, meta = string.match(e, '^([^|]*)|([^|]*)|([^|]*)|(.*)$')
    local exp = redis.call('ZSCORE', KEYS[4], head)
    if exp then
      redis.call('ZREM', KEYS[4], head)
      if tonumber(exp) > now then
        local tok = grant(head, tonumber(ttl), meta, n)
        redis.call('PUBLISH', ch, head .. '|' .. fmt(tok))
        return true
      end
    end
  end
end

-- handoff hands a free lock to the first live waiter. It reports whether
-- the lock is held after it; when not, the line is empty, and lwait goes.
local function handoff()
  if redis.call('EXISTS', KEYS[1]) == 1 then return true end
  if pass_on() then return true end
  redis.call('DEL', KEYS[5])
  return false
end
