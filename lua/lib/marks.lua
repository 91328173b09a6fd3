-- The holders set's markers (members at -inf), read at once by the fast paths: '~' (waiters: the
-- caller takes the full script, {-1}), '~f<fence>' (the last fence, lib/fence.lua), '~h<record>'
-- (the typical hold, lib/hold.lua), '~t' (tenant holders). Top-level code, not a function: the fast
-- paths define no helper. Needs `holders`; sets `marks`, `fenced`, `tenanted`, `record`.
local marks = redis.call('ZRANGEBYSCORE', holders, '-inf', '-inf')
local fenced, tenanted, record = nil, false, nil
for i = 1, #marks do
  local mark = marks[i]
  if mark == '~' then return {-1} end
  if mark == '~t' then
    tenanted = true
  else
    local kind = string.sub(mark, 1, 2)
    if kind == '~f' then fenced = mark elseif kind == '~h' then record = mark end
  end
end
