-- chan_close: close the channel for sending (CloseSend), and wake every
-- waiter: senders to fail, receivers to drain and end.
-- KEYS: as in chan_common.lua
-- ARGV[1] the receivers' wake-up channel, ARGV[2] the senders'
-- Returns 1, or -2 when the channel is gone.
if redis.call('EXISTS', KEYS[2]) == 0 then return -2 end
redis.call('HSET', KEYS[2], 'closed', '1')
redis.call('PUBLISH', ARGV[1], 'c')
redis.call('PUBLISH', ARGV[2], 'c')
return 1
