-- cond_cancel: withdraw a registration. A signal that this waiter already
-- consumed is passed on to the next waiter, so none is lost.
-- KEYS: as in cond_common.lua
-- ARGV[1] ticket, ARGV[2] "1" to pass a consumed signal on
-- Returns 1 when withdrawn, 0 when it had been signalled.
local r = remove_waiter(ARGV[1])
if r == 0 and ARGV[2] == '1' then wake(1) end
tidy()
return r
