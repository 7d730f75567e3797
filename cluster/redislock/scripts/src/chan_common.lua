-- Channels (channel.go): one list of messages per channel and a hash of
-- its parameters, on one hash tag.
-- KEYS[1] the list of messages, oldest first
-- KEYS[2] the hash: cap (messages), max (bytes), closed ('1' after CloseSend),
-- one ('1' for a one-to-one channel: recorded, not enforced)
-- KEYS[3] (send, receive, release) the handle's receipts: a hash from a
-- request's id to what it did, so that a request sent again after its
-- reply was lost (a broken connection, a failover) gets that reply again
-- instead of taking (sending) anew; it expires when the handle is gone.
-- A channel whose hash is gone was removed (or lost by the server): every
-- script then returns -2 and changes nothing.

-- forget deletes the receipts named by ARGV[from..to]: requests whose
-- replies the handle got.
local function forget(from, to)
  if to >= from then redis.call('HDEL', KEYS[3], unpack(ARGV, from, to)) end
end

-- restore puts back at the head of the list, in order, the messages of
-- the receives named by ARGV[from..to], whose replies the handle never got.
local function restore(from, to)
  for i = from, to do
    local b = redis.call('HGET', KEYS[3], ARGV[i])
    if b then
      local msgs = cmsgpack.unpack(b)
      for j = #msgs, 1, -1 do redis.call('LPUSH', KEYS[1], msgs[j]) end
      redis.call('HDEL', KEYS[3], ARGV[i])
    end
  end
end
