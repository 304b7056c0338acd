-- What charge.lua and status.lua share; the binary prepends this file to each
-- (src/quota/redis.rs), so both read the keys the same way.
--
-- Keys of one budget, all under one hash tag `trendsync:{<budget.key>}`:
--   :blocked          until when the upstream said no (us), expiring then
--   :epoch            when this window was created (us), without expiry: a Redis that
--                     lost the window lost it too, and hosts then replay their ledgers
--   :<policy>         sorted set of entries, member "<units>|<method>|<id>", score = us
--   :<policy>:total   "<total>:<oldest>:<expires>": the units in the set, its oldest
--                     entry's time (us), and when the set and this key expire (us).
--                     One key, so that one read tells the common charge everything:
--                     nothing needs evicting while oldest + window > now
--
-- Expiry: the set and its total expire together, at <expires>. A grant leaves it
-- alone while it is at least a window after the grant, and otherwise moves it to a
-- window plus SLACK after the grant: so keys expire by themselves between one window
-- and one window plus SLACK after the newest entry (the last grant), and most grants
-- write no expiry at all. SLACK is a tenth of the window, at most a second.
--
-- An older layout kept the oldest time in a key of its own and the total as a bare
-- number: this one reads such a total as missing and counts the set again (and the
-- older script, reading a value that is not a number, did the same), so the two
-- never trust each other's totals.
--
-- The clock is Redis TIME, never a client's, so hosts with skewed clocks share one
-- window truthfully. Lua numbers are doubles: every count and time here stays below
-- 2^53, and redis.call sends numbers in full; only tostring and `..` would round them
-- (past 14 digits), so values are built with string.format.

-- Reply codes, named alike in src/quota/redis.rs. GRANTED_NOW is the common grant
-- told briefly: a live charge that fitted now in every part, whose newest entry is
-- therefore now (the window empties a window from now) and that waited for nothing.
-- Its reply is one string, not a table: Redis turns a table into an array reply
-- whose length it learns only at the end, and that costs it a reply buffer of its
-- own for every call.
local GRANTED, DENIED, DUPLICATE, BLOCKED, GRANTED_NOW = 0, 1, 2, 3, 4
local FIT_NOW, FIT_AFTER, FIT_NEVER = 0, 1, 2

-- The most a key outlives the newest entry of its window by (us).
local SLACK_MAX = 1000000

-- The helpers of the less common paths, made only when one is taken: every `local
-- function` costs an allocation each time the script runs, and the common charge
-- path needs none of them.
local function helpers()
  local h = {}

  -- A policy's total, oldest time and expiry, as numbers; nil for a missing key or
  -- one of another layout.
  function h.state_of(value)
    if not value then return nil end
    local total, oldest, expires = string.match(value, '^(%d+):(%d+):(%d+)$')
    if not total then return nil end
    return tonumber(total), tonumber(oldest), tonumber(expires)
  end

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

  -- Writes a policy's total and oldest time, and gives it and its set the expiry
  -- of the rule above for a newest entry at `newest`.
  function h.keep(tkey, zkey, total, oldest, newest, window, now)
    local expires = newest + window + math.min(math.floor(window / 10), SLACK_MAX)
    local ttl = math.ceil((expires - now) / 1000)
    redis.call('SET', tkey, string.format('%d:%d:%d', total, oldest, expires), 'PX', ttl)
    redis.call('PEXPIRE', zkey, ttl)
  end

  return h
end
