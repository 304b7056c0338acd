-- What charge.lua and status.lua share; the binary prepends this file to each
-- (src/quota/redis.rs), so both read the keys the same way.
--
-- Keys of one budget, all under one hash tag `trendsync:{<budget.key>}`:
--   :blocked:<method> until when the upstream said no to the method's bucket (us),
--                     expiring then: a block stays with the methods it stopped, under
--                     whatever costs file (docs/budget.md, "When the costs file changes")
--   :epoch            when this window was created (us), without expiry: a Redis that
--                     lost the window lost it too, and hosts then replay their ledgers
--   :budget:stamp     "<fingerprint> <bucket> ...": the budget the entries are counted
--                     under, and the buckets whose sets hold them; without expiry
--   :<bucket>         a bucket's sorted set of entries (`:budget` for the main one),
--                     member "<units>|<method>|<id>|<calls>", score = us
--   :limit:<limit>    a `[[limit]]`'s, alike: a limit and a bucket never share a key
--   <set>:total       the units counted in the set, a bare integer (a grant adds with
--                     INCRBY)
--   <set>:oldest      "<oldest>:<expires>": the oldest counted entry's time, and when
--                     the total and this key expire (us). Nothing needs evicting while
--                     oldest + window > now. Entries before it have left the window
--                     and stay in the set, uncounted, for 31 days, so that
--                     another costs file can count them again (recount.lua). An
--                     expiry later than the rule below allows says TIME went back
--                     since it was written: the set is counted again
--
-- Windows: a policy's window argument is either a number, the microseconds of a
-- sliding window (an entry made at `at` counts while at > now - window, and leaves at
-- at + window), or a calendar day, "d<m1>,<m2>,<m0>,<m3>": four local midnights the
-- client computed around its own clock, the start and end of its own day first, then
-- the start of the day before and the end of the day after (in time order m0 < m1 <
-- m2 < m3). The day is the one that TIME falls in; an
-- entry counts while it was made that day, and leaves at the day's end. `span` reads
-- either: the cutoff (entries at or before it no longer count), when an entry made now
-- leaves, and for a day its end (nil for a sliding window, whose length comes fourth).
--
-- Expiry: the total and oldest keys of a policy expire together, at <expires>, and the set
-- with them or later, a week (JUMP_MARGIN) after the last entry it keeps has been kept its 31 days. A
-- grant leaves it alone while it is at least as late as the grant's own entry leaves, and
-- otherwise moves it there plus SLACK: so keys expire by themselves between one window and
-- one window plus SLACK after their newest entry (the last grant; in a calendar day, at the
-- day's end), and most grants write no expiry at all. SLACK is a tenth of the window (of
-- what is left of the day), at most a second. (One gap: a set deleted by hand while its
-- total and oldest keys remain is made again by the next grant without an expiry, and gets
-- one when the expiry next moves, or when those keys have expired and a later charge counts
-- the set again.)
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
-- The stamp is not the client's budget: count the entries again first.
local RECOUNT = 'RECOUNT'
local FIT_NOW, FIT_AFTER, FIT_NEVER = 0, 1, 2

-- The most a key outlives the newest entry of its window by (us).
local SLACK_MAX = 1000000
-- How much longer than its entries are kept a set lives (us): a week, so that a Redis
-- whose clock jumps ahead by less does not expire entries that, once its clock is
-- set right, are in the window again.
local JUMP_MARGIN = 7 * 86400 * 1000000

local function span(w, now)
  -- A sliding window unless it starts with 'd' (100). `w + 0` reads the number once;
  -- `tonumber(w)` would read it twice (Lua 5.1 tests, then converts).
  if string.byte(w) ~= 100 then
    local window = w + 0
    return now - window, now + window, nil, window
  end
  -- A calendar day. TIME nearly always falls in the client's own day, [m1, m2), which
  -- comes first so that only two midnights are read, found with plain `find`:
  -- string.match's captures would make a new string each. `x + 0` reads a number
  -- once (the client wrote digits between the commas); `tonumber` would read it twice.
  local find, sub = string.find, string.sub
  local p1 = find(w, ',', 2, true)
  local p2 = p1 and find(w, ',', p1 + 1, true)
  local b = p2 and sub(w, 2, p1 - 1) + 0
  local c = b and sub(w, p1 + 1, p2 - 1) + 0
  if c and now >= b and now < c then return b - 1, c, c, nil end
  local p3 = c and find(w, ',', p2 + 1, true)
  local a = p3 and tonumber(sub(w, p2 + 1, p3 - 1))
  local d = a and tonumber(sub(w, p3 + 1))
  if not d then
    return error({err = 'ERR a calendar-day window argument is malformed'})
  end
  if now < a or now >= d then
    -- TIME is outside the three days around the client's clock: the two clocks are
    -- more than a day apart, and this script cannot tell which is wrong. CLOCKAPART
    -- and TIME, first, are what the client reads (src/quota/redis/diagnose.rs).
    return error({err = string.format('CLOCKAPART %d is TIME (us), outside the days the client sent', now)})
  end
  if now < b then return a - 1, b, b, nil end
  return c - 1, d, d, nil
end

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

  -- The oldest entry's time after `cutoff` (one the window counts), or nil for none.
  function h.first_after(zkey, cutoff)
    local first = redis.call('ZRANGEBYSCORE', zkey, '(' .. string.format('%d', cutoff), '+inf',
      'WITHSCORES', 'LIMIT', 0, 1)
    if first[2] then return tonumber(first[2]) end
    return nil
  end

  function h.newest_in(zkey)
    local last = redis.call('ZRANGE', zkey, -1, -1, 'WITHSCORES')
    if last[2] then return tonumber(last[2]) end
    return nil
  end

  -- Units of the entries scored from `from` through `to` (ZRANGEBYSCORE bounds).
  function h.units_between(zkey, from, to)
    local units = 0
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', zkey, from, to)) do
      units = units + h.units_of(m)
    end
    return units
  end

  -- The keeping argument, "<held>" or "<held>:<confirmed>": how long every entry is
  -- kept (us), and the time before which entries are dropped. That is `held` before
  -- now, or before the last time the upstream confirmed this clock when that is
  -- earlier (but not more than JUMP_MARGIN earlier, which sets outlive anyway): a
  -- TIME that jumped ahead may evict entries from a window, which counting again
  -- undoes once it is set right, but it drops none that the window would still hold
  -- by the confirmed time (docs/budget.md, "The clock").
  function h.holding(arg, now)
    local colon = string.find(arg, ':', 1, true)
    if not colon then
      local held = tonumber(arg)
      return held, now - held
    end
    local held = tonumber(string.sub(arg, 1, colon - 1))
    local confirmed = tonumber(string.sub(arg, colon + 1))
    return held, math.max(math.min(now, confirmed), now - JUMP_MARGIN) - held
  end

  -- The expiry (ms from now) of a set whose newest entry is `newest`.
  function h.set_ttl(held, newest, now)
    return math.ceil((newest - now + held + JUMP_MARGIN) / 1000)
  end

  -- Whether TIME went back since part p's keys were written to expire at `expires`:
  -- by the rule above they expire at most SLACK_MAX after an entry made now leaves.
  function h.went_back(p, expires, now)
    return expires - (p.stop or now + p.window) > SLACK_MAX
  end

  -- Writes part p's total and oldest time, and gives them and its set the expiry of
  -- the rule above for a newest entry at `newest`. An entry newer than now (TIME went
  -- back) is counted while its window holds it, but the keys expire as if it were
  -- made now, so that the next charges see a clock that agrees with them.
  function h.keep(p, total, oldest, newest, now)
    local tkey, okey, zkey = p.tkey, p.okey, p.zkey
    local leaves = p.stop or math.min(newest, now) + p.window
    local expires = leaves + math.min(math.floor(((p.stop or now + p.window) - now) / 10), SLACK_MAX)
    local ttl = math.ceil((expires - now) / 1000)
    redis.call('SET', tkey, total, 'PX', ttl)
    redis.call('SET', okey, string.format('%d:%d', oldest, expires), 'PX', ttl)
    redis.call('PEXPIRE', zkey, math.max(ttl, h.set_ttl(p.held, newest, now)))
  end

  return h
end
