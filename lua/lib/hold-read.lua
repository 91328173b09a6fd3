-- What a refusal says of the id's typical hold (lib/hold.lua): the record's average, at least 1 ms,
-- while it counts; 0 when none does. Expects the locals `record` (the record, its marker '~h<record>'
-- or its suffix ' <record>'; or nil) and now; sets the local `hold`.
local hold = 0
do
  local avg, upto = string.match(record or '', '(%d+):(%d+)$')
  if upto and tonumber(upto) > now then hold = math.max(1, tonumber(avg)) end
end
