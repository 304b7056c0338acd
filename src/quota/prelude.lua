-- What charge.lua and status.lua share; the binary prepends this file to each
-- (src/quota/redis.rs), so both read the keys the same way.
--
-- Keys of one budget, all under one hash tag `trendsync:{<budget.key>}`:
--   :blocked          until when the upstream said no (us), expiring then
--   :epoch            when this window was created (us), without expiry: a Redis that
--                     lost the window lost it too, and hosts then replay their ledgers
--   :<policy>         sorted set of entries, member "<units>|<method>|<id>", score = us
--   :<policy>:total   "<units in the set>:<oldest entry's score>", expiring with the set
--
-- The clock is Redis TIME, never a client's, so hosts with skewed clocks share one
-- window truthfully. Lua numbers are doubles: every count and time here stays below
-- 2^53, and redis.call sends numbers in full (only tostring and `..` would round them).

-- Reply codes, named alike in src/quota/redis.rs.
local GRANTED, DENIED, DUPLICATE, BLOCKED = 0, 1, 2, 3
local FIT_NOW, FIT_AFTER, FIT_NEVER = 0, 1, 2

local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function units_of(member)
  return tonumber(string.match(member, '^(%d+)|')) or 0
end

-- The running total and the oldest entry's time; the oldest is nil when a bare
-- count was stored (by an earlier trendsync, or by hand).
local function read_total(value)
  if not value then return nil, nil end
  local total, oldest = string.match(value, '^(%d+):(%d+)$')
  if total then return tonumber(total), tonumber(oldest) end
  return tonumber(value), nil
end

local function total_value(total, oldest)
  return string.format('%d:%d', total, oldest)
end

-- The oldest entry's time, or nil for an empty set.
local function oldest_in(zkey)
  local first = redis.call('ZRANGE', zkey, 0, 0, 'WITHSCORES')
  if first[2] then return tonumber(first[2]) end
  return nil
end

local function newest_in(zkey)
  local last = redis.call('ZRANGE', zkey, -1, -1, 'WITHSCORES')
  if last[2] then return tonumber(last[2]) end
  return nil
end

-- Units of the entries at or before `cutoff`: those that have left the window.
local function units_until(zkey, cutoff)
  local units = 0
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', zkey, '-inf', cutoff)) do
    units = units + units_of(m)
  end
  return units
end
