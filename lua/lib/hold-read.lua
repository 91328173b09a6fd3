-- What a refusal says of the id's typical hold (lib/hold.lua): the record's average, at least 1 ms,
-- while it counts; 0 when none does. `record` is the record, its marker '~h<record>' or its suffix
-- ' <record>' (or nil). Included where a refusal is answered, not at the top of a hot path: a Lua
-- function is made anew on every call of the script that defines it.
local function hold_read(record, now)
  local avg, upto = string.match(record or '', '(%d+):(%d+)$')
  if upto and tonumber(upto) > now then return math.max(1, tonumber(avg)) end
  return 0
end
