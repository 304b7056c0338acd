-- Writes a budget's windows as counted again under the client's costs file (the key
-- layout and helpers are in prelude.lua, prepended to this file): every entry the
-- budget keeps, in the sets of the buckets and limits that hold its method today, at
-- today's costs, each set's total and oldest time counted again on Redis's clock.
--
-- KEYS[1]                      the budget's stamp
-- KEYS[2 .. 1+o]               the sets entries.lua read, in its order
-- KEYS[2+o .. 1+o+d]           keys to delete first (the old sets and their companions)
-- then 3 keys per new policy   its set, total and oldest time
-- ARGV[1]                      the stamp entries.lua read ('' for none)
-- ARGV[2]                      the token entries.lua gave
-- ARGV[3]                      the new stamp
-- ARGV[4]                      how long entries are kept (us), and when the upstream
--                              last confirmed TIME (`holding` in prelude.lua)
-- ARGV[5], [6], [7]            o, d, and m, the number of new policies
-- then per new policy          its window (see `span`), c, and c pairs of score and
--                              member
--
-- Returns DONE, or AGAIN when the stamp or the entries changed since they were read
-- (another host charged or counted meanwhile): the client reads them again.

local stamp = redis.call('GET', KEYS[1]) or ''
if stamp ~= ARGV[1] then return 'AGAIN' end
local o, d, m = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local read = {}
for k = 2, 1 + o do
  read[#read + 1] = table.concat(redis.call('ZRANGE', KEYS[k], 0, -1, 'WITHSCORES'), '\n')
end
if redis.sha1hex(table.concat(read, '\n\n')) ~= ARGV[2] then return 'AGAIN' end

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local h = helpers()
local held, pruned = h.holding(ARGV[4], now)
for k = 2 + o, 1 + o + d do
  redis.call('DEL', KEYS[k])
end
local a = 8
for i = 1, m do
  local base = 1 + o + d + 3 * (i - 1)
  local p = {zkey = KEYS[base + 1], tkey = KEYS[base + 2], okey = KEYS[base + 3], held = held}
  redis.call('DEL', p.zkey, p.tkey, p.okey)
  local _
  p.cutoff, _, p.stop, p.window = span(ARGV[a], now)
  local c = tonumber(ARGV[a + 1])
  a = a + 2
  local j = 0
  while j < c do
    local k = math.min(c - j, 200)
    local args = {}
    for x = 0, k - 1 do
      args[2 * x + 1] = ARGV[a + 2 * (j + x)]
      args[2 * x + 2] = ARGV[a + 2 * (j + x) + 1]
    end
    redis.call('ZADD', p.zkey, unpack(args))
    j = j + k
  end
  a = a + 2 * c
  redis.call('ZREMRANGEBYSCORE', p.zkey, '-inf', '(' .. string.format('%d', pruned))
  local total = h.units_between(p.zkey, '(' .. string.format('%d', p.cutoff), '+inf')
  local oldest = h.first_after(p.zkey, p.cutoff)
  local newest = h.newest_in(p.zkey)
  if oldest and total > 0 then
    h.keep(p, total, oldest, newest, now)
  elseif newest then
    redis.call('PEXPIRE', p.zkey, h.set_ttl(held, newest, now))
  end
end
redis.call('SET', KEYS[1], ARGV[3])
return 'DONE'
