-- What charge.lua and status.lua share; the binary prepends this file to each
-- (src/quota/redis.rs), so both read the keys the same way.
--
-- Keys of one budget, all under one hash tag `trendsync:{<budget.key>}`:
--   :blocked          until when the upstream said no (us), expiring then
--   :epoch            when this window was created (us), without expiry: a Redis that
--                     lost the window lost it too, and hosts then replay their ledgers
--   :<policy>         sorted set of entries, member "<units>|<method>|<id>", score = us
--   :<policy>:total   the units in the set, expiring with it
--   :<policy>:oldest  the oldest entry's time, expiring (to the millisecond) when that
--                     entry leaves the window: while it is there and inside the
--                     window, nothing needs evicting
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

-- The helpers of the less common paths, made only when one is taken: every `local
-- function` costs an allocation each time the script runs, and the common charge
-- path needs none of them.
local function helpers()
  local h = {}

  function h.units_of(member)
    return tonumber(string.match(member, '^(%d+)|')) or 0
  end

  -- The oldest entry's time, or nil for an empty set.
  function h.oldest_in(zkey)
    local first = redis.call('ZRANGE', zkey, 0, 0, 'WITHSCORES')
    if first[2] then return tonumber(first[2]) end
    return nil
  end

  function h.newest_in(zkey)
    local last = redis.call('ZRANGE', zkey, -1, -1, 'WITHSCORES')
    if last[2] then return tonumber(last[2]) end
    return nil
  end

  -- Units of the entries at or before `cutoff`: those that have left the window.
  function h.units_until(zkey, cutoff)
    local units = 0
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', zkey, '-inf', cutoff)) do
      units = units + h.units_of(m)
    end
    return units
  end

  -- Milliseconds until `at` leaves a window of `window` us, rounded up: a key given
  -- this expiry outlives the entry's count by less than a millisecond, never more.
  function h.ttl_ms(at, window, now)
    return math.ceil((at + window - now) / 1000)
  end

  return h
end
