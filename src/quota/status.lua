-- Reads the state of one or more sliding-window logs without changing them (the key
-- layout and helpers are in prelude.lua, prepended to this file).
--
-- KEYS[1]                      the budget's block key
-- KEYS[3i-1], [3i], [3i+1]     policy i: its sorted set, its total, its oldest time
-- ARGV[2i-1], [2i]             policy i: window (us), and 1 to list its entries
--
-- Returns {now_us, blocked_until_us (0 for none), {policy...}} where each policy is
-- {used, next_free_us, empty_in_us (-1 for none), {member, score, ...}}.

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local h = helpers()

local blocked = tonumber(redis.call('GET', KEYS[1]) or '0')
if blocked <= now then blocked = 0 end
local policies = {}
for i = 1, (#KEYS - 1) / 3 do
  local zkey, tkey, okey = KEYS[3 * i - 1], KEYS[3 * i], KEYS[3 * i + 1]
  local window = tonumber(ARGV[2 * i - 1])
  local want_entries = ARGV[2 * i] == '1'
  local cutoff = now - window
  local after = '(' .. string.format('%d', cutoff)
  local stored = redis.call('MGET', tkey, okey)
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
  local next_free, empty_in = -1, -1
  if oldest then
    next_free = oldest + window - now
    empty_in = h.newest_in(zkey) + window - now
  end
  local entries = {}
  if want_entries then
    entries = redis.call('ZRANGEBYSCORE', zkey, after, '+inf', 'WITHSCORES')
  end
  policies[#policies + 1] = {used, next_free, empty_in, entries}
end
return {now, blocked, policies}
