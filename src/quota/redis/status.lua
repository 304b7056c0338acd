-- Reads the state of one or more windows without changing them (the key layout and
-- helpers are in prelude.lua, prepended to this file).
--
-- KEYS[1]              the budget's stamp
-- KEYS[3i-1 .. 3i+1]   policy i: its sorted set, its total and its oldest time
-- KEYS[3p+2 ..]        the blocks of methods, each `:blocked:<method>`
-- ARGV[1]              the stamp of the client's budget; '' to read whatever it is
-- ARGV[2]              p, the number of policies
-- ARGV[2i+1], [2i+2]   policy i: window (see `span`), and 1 to list its entries
--
-- Returns {now_us, {policy...}, {blocked_until_us...}} where each policy is {used,
-- next_free_us, empty_in_us (-1 for none), {member, score, ...}, newest_us (the
-- newest counted entry's time, -1 for none: later than now_us when TIME went back)},
-- and each method's block is until when (0 for none). When the stamp is not the
-- client's, returns RECOUNT: the entries are to be counted again first.

if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return RECOUNT
end
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local h = helpers()
local count = tonumber(ARGV[2])

local policies = {}
for i = 1, count do
  local zkey, tkey, okey = KEYS[3 * i - 1], KEYS[3 * i], KEYS[3 * i + 1]
  local cutoff, _, stop, window = span(ARGV[2 * i + 1], now)
  local want_entries = ARGV[2 * i + 2] == '1'
  local after = '(' .. string.format('%d', cutoff)
  local stored = redis.call('MGET', tkey, okey)
  local used, oldest, expires = tonumber(stored[1]), h.oldest_of(stored[2])
  if not (used and oldest) or h.went_back({stop = stop, window = window}, expires, now) then
    -- Missing, or written before TIME went back: what a clock that ran ahead evicted
    -- may be in the window again.
    used = h.units_between(zkey, after, '+inf')
    oldest = nil
  elseif oldest <= cutoff then
    -- Not yet evicted, but no longer counted.
    used = used - h.units_between(zkey, oldest, cutoff)
    oldest = nil
  end
  if not oldest then oldest = h.first_after(zkey, cutoff) end
  local next_free, empty_in, newest = -1, -1, -1
  if oldest then
    newest = h.newest_in(zkey)
    next_free = (stop or oldest + window) - now
    empty_in = (stop or newest + window) - now
  end
  local entries = {}
  if want_entries then
    entries = redis.call('ZRANGEBYSCORE', zkey, after, '+inf', 'WITHSCORES')
  end
  policies[#policies + 1] = {used, next_free, empty_in, entries, newest}
end
local blocks = {}
for k = 3 * count + 2, #KEYS do
  local until_us = tonumber(redis.call('GET', KEYS[k]) or '0')
  if until_us <= now then until_us = 0 end
  blocks[#blocks + 1] = until_us
end
return {now, policies, blocks}
