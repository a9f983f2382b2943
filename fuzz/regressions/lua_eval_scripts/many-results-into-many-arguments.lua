return cmsgpack.pack(cmsgpack.unpack(string.rep(string.rep('\161a', 32) .. 'x', 240)))
