-- Found by lua_eval (crash-1009d306): cjson.encode held about eight mlua handles per level
-- of a nested map, and 1000 levels ran mlua out of handles (the process aborted).
local function d(n) local r = {} local x = r for i = 2, n do x.k = {} x.j = 1 x = x.k end return r end
local ok1 = pcall(cjson.encode, d(1000))
local ok2, e2 = pcall(cjson.encode, d(1001))
return {tostring(ok1), tostring(ok2), e2}
