-- What charge.lua and status.lua share; the binary prepends this file to each
-- (src/quota/redis.rs), so both read the keys the same way.
--
-- Keys of one budget, all under one hash tag `trendsync:{<budget.key>}`:
--   :blocked          until when the upstream said no (us), expiring then
--   :epoch            when this window was created (us), without expiry: a Redis that
--                     lost the window lost it too, and hosts then replay their ledgers
--   :<policy>         sorted set of entries, member "<units>|<method>|<id>", score = us
--   :<policy>:total   the units in the set, a bare integer (a grant adds with INCRBY)
--   :<policy>:oldest  "<oldest>:<expires>": the set's oldest entry's time, and when
--                     the set, its total and this key expire (us). Nothing needs
--                     evicting while oldest + window > now
--
-- Expiry: the three keys of a policy expire together, at <expires>. A grant leaves
-- it alone while it is at least a window after the grant, and otherwise moves it to
-- a window plus SLACK after the grant: so keys expire by themselves between one
-- window and one window plus SLACK after their newest entry (the last grant), and
-- most grants write no expiry at all. SLACK is a tenth of the window, at most a
-- second. (One gap: a set deleted by hand while its total and oldest keys remain is
-- made again by the next grant without an expiry, and gets one when the expiry next
-- moves, or when those keys have expired and a later charge counts the set again.)
--
-- The layout before this one kept a bare time in `:oldest`, expiring when that entry
-- left. Each reads the other's `:oldest` as missing and finds the oldest entry again
-- from the set; both keep `:total` the same way.
--
-- The clock is Redis TIME, never a client's, so hosts with skewed clocks share one
-- window truthfully. Lua numbers are doubles: every count and time here stays below
-- 2^53, and redis.call sends numbers in full; only tostring and `..` would round them
-- (past 14 digits), so numbers become text through string.format.

-- Reply codes, named alike in src/quota/redis.rs. GRANTED_NOW is the common grant
-- told briefly: a live charge that fitted now in every part, whose newest entry is
-- therefore now. Its reply is one string that only joins text the script already
-- has (see charge.lua); it is text itself for that reason. Turning a number into
-- text costs a Lua script more than a Redis call, and a table reply costs Redis an
-- array whose length it learns only at the end: a reply block of its own per call.
local GRANTED, DENIED, DUPLICATE, BLOCKED, GRANTED_NOW = 0, 1, 2, 3, '4'
local FIT_NOW, FIT_AFTER, FIT_NEVER = 0, 1, 2

-- The most a key outlives the newest entry of its window by (us).
local SLACK_MAX = 1000000

-- The helpers of the less common paths, made only when one is taken: every `local
-- function` costs an allocation each time the script runs, and the common charge
-- path needs none of them.
local function helpers()
  local h = {}

  -- The oldest time and expiry of a policy's `:oldest` key, as numbers; nil for a
  -- missing key or one of the older layout.
  function h.oldest_of(value)
    if not value then return nil end
    local oldest, expires = string.match(value, '^(%d+):(%d+)$')
    if not oldest then return nil end
    return tonumber(oldest), tonumber(expires)
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

  -- Writes a policy's total and oldest time, and gives them and its set the expiry
  -- of the rule above for a newest entry at `newest`.
  function h.keep(tkey, okey, zkey, total, oldest, newest, window, now)
    local expires = newest + window + math.min(math.floor(window / 10), SLACK_MAX)
    local ttl = math.ceil((expires - now) / 1000)
    redis.call('SET', tkey, total, 'PX', ttl)
    redis.call('SET', okey, string.format('%d:%d', oldest, expires), 'PX', ttl)
    redis.call('PEXPIRE', zkey, ttl)
  end

  return h
end
