local t = {} for i = 1, 7990 do t[i] = 'x' .. i end
return {pcall(cmsgpack.pack, unpack(t))}
