-- Reads the state of one or more windows without changing them (the key layout and
-- helpers are in prelude.lua, prepended to this file).
--
-- KEYS[4i-3 .. 4i]     policy i: its sorted set, its total, its oldest time, and its
--                      block key (a bucket's; a limit's is never written)
-- ARGV[2i-1], [2i]     policy i: window (see `span`), and 1 to list its entries
--
-- Returns {now_us, {policy...}} where each policy is {used, next_free_us, empty_in_us
-- (-1 for none), {member, score, ...}, blocked_until_us (0 for none), newest_us (the
-- newest counted entry's time, -1 for none: later than now_us when TIME went back)}.

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local h = helpers()

local policies = {}
for i = 1, #KEYS / 4 do
  local zkey, tkey, okey, bkey = KEYS[4 * i - 3], KEYS[4 * i - 2], KEYS[4 * i - 1], KEYS[4 * i]
  local cutoff, _, stop, window = span(ARGV[2 * i - 1], now)
  local want_entries = ARGV[2 * i] == '1'
  local after = '(' .. string.format('%d', cutoff)
  local stored = redis.call('MGET', tkey, okey, bkey)
  local used, oldest = tonumber(stored[1]), h.oldest_of(stored[2])
  if not used then
    used = 0
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', zkey, after, '+inf')) do
      used = used + h.units_of(m)
    end
    oldest = nil
  elseif not oldest or oldest <= cutoff then
    -- Not yet evicted, but no longer counted.
    used = used - h.units_until(zkey, cutoff)
    oldest = nil
  end
  if not oldest then
    local first = redis.call('ZRANGEBYSCORE', zkey, after, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if first[2] then oldest = tonumber(first[2]) end
  end
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
  local blocked = tonumber(stored[3] or '0')
  if blocked <= now then blocked = 0 end
  policies[#policies + 1] = {used, next_free, empty_in, entries, blocked, newest}
end
return {now, policies}
