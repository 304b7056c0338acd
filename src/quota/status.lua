-- Reads the state of one or more sliding-window logs without changing them.
--
-- KEYS[1]            the budget's block key
-- KEYS[2i], [2i+1]   policy i: its sorted set of entries and its running total
-- ARGV[2i-1], [2i]   policy i: window (us), and 1 to list its entries
--
-- Returns {now_us, blocked_until_us (0 for none), {policy...}} where each policy is
-- {used, next_free_us, empty_in_us (-1 for none), {member, score, ...}}.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local function units_of(member)
  return tonumber(string.match(member, '^(%d+)|')) or 0
end

local blocked = tonumber(redis.call('GET', KEYS[1]) or '0')
if blocked <= now then blocked = 0 end
local policies = {}
for i = 1, (#KEYS - 1) / 2 do
  local zkey, tkey = KEYS[2 * i], KEYS[2 * i + 1]
  local window = tonumber(ARGV[2 * i - 1])
  local want_entries = ARGV[2 * i] == '1'
  local after = '(' .. string.format('%.0f', now - window)
  local used = 0
  local total = redis.call('GET', tkey)
  if total then
    used = tonumber(total)
    -- Not yet evicted, but no longer counted.
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', zkey, '-inf', string.format('%.0f', now - window))) do
      used = used - units_of(m)
    end
  else
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', zkey, after, '+inf')) do
      used = used + units_of(m)
    end
  end
  local next_free, empty_in = -1, -1
  local oldest = redis.call('ZRANGEBYSCORE', zkey, after, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #oldest > 0 then
    next_free = tonumber(oldest[2]) + window - now
    local newest = redis.call('ZRANGE', zkey, -1, -1, 'WITHSCORES')
    empty_in = tonumber(newest[2]) + window - now
  end
  local entries = {}
  if want_entries then
    entries = redis.call('ZRANGEBYSCORE', zkey, after, '+inf', 'WITHSCORES')
  end
  policies[#policies + 1] = {used, next_free, empty_in, entries}
end
return {now, blocked, policies}
