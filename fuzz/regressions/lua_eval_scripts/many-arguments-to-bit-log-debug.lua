local t = {} for i = 1, 7990 do t[i] = tostring(i) end
redis.log(redis.LOG_DEBUG, unpack(t))
redis.debug(unpack(t))
return {bit.bor(unpack(t)), pcall(struct.pack, string.rep('s', 7990), unpack(t))}
