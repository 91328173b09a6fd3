-- The holders set's markers (every member at a negative score), read at once by the fast paths: '~'
-- (waiters: the caller takes the full script, {-1}), '~f' (the last fence, as its negated score:
-- lib/fence.lua), '~h<record>' (the typical hold, lib/hold.lua), '~t' (tenant holders), '~r' (the
-- tenant index counts permits pruned without it: rebuild it before reading it).

-- Returns nil when waiters exist (the marker '~'); else the number of markers, the last fence (0 for
-- none), whether the marker '~f' is there, whether tenants hold ('~t'), whether the tenant index
-- must be rebuilt ('~r') and the typical hold's marker (or nil).
local function marks_read(holders)
  local marks = redis.call('ZRANGEBYSCORE', holders, '-inf', '(0', 'WITHSCORES')
  local last, fenced, tenanted, rebuild, record = 0, false, false, false, nil
  for i = 1, #marks, 2 do
    local mark = marks[i]
    if mark == '~' then return nil end
    if mark == '~f' then
      local f = -(marks[i + 1] + 0)
      if f > last then last = f end
      fenced = true
    elseif mark == '~t' then
      tenanted = true
    elseif mark == '~r' then
      rebuild = true
    elseif string.sub(mark, 1, 2) == '~h' then
      record = mark
    end
  end
  return #marks / 2, last, fenced, tenanted, rebuild, record
end
