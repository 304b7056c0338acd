-- Reads every entry a budget keeps, for counting them again under another costs file
-- (recount.lua; the key layout is in prelude.lua, prepended to this file).
--
-- KEYS[1]   the budget's stamp
-- KEYS[2..] the sets that hold its entries: its buckets' as the stamp names them
--
-- Returns {stamp ('' for none), token, {member, score, ...} per set}. The token
-- names what was read; recount.lua writes only while it still names what is there.

local sets, parts = {}, {}
for k = 2, #KEYS do
  local got = redis.call('ZRANGE', KEYS[k], 0, -1, 'WITHSCORES')
  sets[#sets + 1] = got
  parts[#parts + 1] = table.concat(got, '\n')
end
return {redis.call('GET', KEYS[1]) or '', redis.sha1hex(table.concat(parts, '\n\n')), sets}
