-- Decides one weighted charge against one or more sliding-window logs, atomically
-- (the key layout, the expiry rule and the helpers are in prelude.lua, prepended to
-- this file).
--
-- KEYS[1], [2], [3]  the block of the charge's method, the budget's epoch marker, and
--                    its stamp (the fingerprint of the budget last charged)
-- KEYS[3+i]          part i's total          } each kind together, so that one
-- KEYS[3+n+i]        part i's oldest time    } MGET reads block, epoch, stamp and
-- KEYS[3+2n+i]       part i's sorted set of entries
-- ARGV[1]            the stamp of the client's budget; '' to charge whatever it is
-- ARGV[2]            how long every entry is kept (us), whatever its window, and
--                    when the upstream last confirmed TIME: see `holding` in
--                    prelude.lua
-- ARGV[4i-1 .. 4i+2] part i: window (us, or a calendar day: see `span` in
--                    prelude.lua); room, the most its total may be for this charge
--                    to fit (max - units, which the client computes exactly, so that
--                    the common path reads one number fewer); units; and the member,
--                    "<units>|<method>|<id>|<calls>" (the id is unique per call),
--                    whole, so that the script joins no text for it
-- ARGV[4n+3]         only when replaying a call already made (journalled or in the
--                    ledger): its age in microseconds; it is recorded whatever the
--                    window holds
--
-- Returns {code, blocked_wait_us, epoch, now_us, part...}: code GRANTED, DENIED,
-- DUPLICATE (already recorded) or BLOCKED; each part is used, fit (FIT_NOW,
-- FIT_AFTER, FIT_NEVER), wait_us, next_free_us, empty_in_us (-1 for none). When the
-- stamp is not the client's, it charges nothing and returns RECOUNT: the entries were
-- counted under another budget, and the client counts them again under its own
-- (recount.lua) before it charges.
--
-- The common grant answers briefly, in one string: "GRANTED_NOW epoch secs micros"
-- (the epoch, and TIME as Redis gave it), then per part " total oldest:expires" as
-- the script read them, before this charge. Every part fitted now, so the reader
-- knows the rest: used = total + units, next_free = when the oldest entry leaves,
-- empty_in = when an entry made now leaves (a window from now, or the day's end).
-- The script joins only text it already has: no number becomes text.
--
-- The common path, a live charge that is granted, makes four calls for one part:
-- TIME, one MGET (block, epoch, stamp, every total and oldest time), ZADD NX (the
-- duplicate check and the insert in one), and INCRBY of the total, which keeps its
-- expiry; the expiry is moved (PEXPIRE, PEXPIRE, SET) only when it falls short of a
-- window after the grant, about once per SLACK while charges keep coming. It runs as
-- little Lua as it can, since at 20 clients the script's own work is what limits
-- throughput (BENCHMARKS.md): no table, and no number turned into text; the stamp is
-- one comparison of two strings. Eviction, denial, duplicates, replays and a first
-- entry read or write more.
--
-- An entry stays in its set for ARGV[2] (31 days), after it has left the window:
-- `:total` counts only the entries from `:oldest` on, and those before it are kept so that
-- another costs file can count them again (docs/budget.md, "When the costs file changes").

-- Globals read once: each use of a global is a lookup in the globals table.
local KEYS, ARGV, call = KEYS, ARGV, redis.call
local find, sub = string.find, string.sub

local t = call('TIME')
-- Now as text joined from TIME's own digits (seconds, then microseconds padded to
-- six), which is the entries' score: Redis would write the number out with a
-- 17-digit printf, the dearest step of the common path after the calls themselves.
-- The number is read from that text, one conversion instead of two.
local score = t[1] .. sub('00000', #t[2]) .. t[2]
local now = score + 0
local n = (#KEYS - 3) / 3
local age = ARGV[4 * n + 3]

local stored = call('MGET', unpack(KEYS, 1, 3 + 2 * n))
if stored[3] ~= ARGV[1] and ARGV[1] ~= '' then
  return RECOUNT
end
local epoch = stored[2]
if not epoch then
  -- A new window, or one this Redis lost: hosts that saw another epoch replay.
  epoch = score
  call('SET', KEYS[2], epoch)
end

-- The common path: a live charge, not blocked, every part's total and oldest time
-- readable, nothing to evict, and room for it in every part. The last part's
-- values stay in these locals; `moves` says whether any part's expiry falls short,
-- and only then, with several parts, do the writes read the others again.
-- The oldest key is split with find and sub, a third of what string.match costs;
-- the older layout's bare number has no colon and goes the general way. (Text that
-- is not a number, which only a hand could write there, stops the script with an
-- error rather than count wrong.)
local common = not age and not (stored[1] and stored[1] - now > 0)
local oldest, expires, cutoff, leaves
local moves = false
for i = 1, n do
  if not common then break end
  local total, kept = stored[3 + i], stored[3 + n + i]
  local colon = kept and find(kept, ':', 1, true)
  if not (total and colon) then
    common = false
  else
    oldest, expires = sub(kept, 1, colon - 1), sub(kept, colon + 1)
    cutoff, leaves = span(ARGV[4 * i - 1], now)
    -- The keys expire at most SLACK_MAX after an entry made now leaves; later, and
    -- TIME went back since they were written: the general path counts the set again.
    local gap = expires - leaves
    common = gap - SLACK_MAX <= 0 and oldest - cutoff > 0
      and total - ARGV[4 * i] <= 0
    moves = moves or gap < 0
  end
end
for i = 1, n do
  if not common then break end
  if call('ZADD', KEYS[3 + 2 * n + i], 'NX', score, ARGV[4 * i + 2]) == 0 then
    -- Recorded before: undo, and let the general path below answer.
    for j = 1, i - 1 do
      call('ZREM', KEYS[3 + 2 * n + j], ARGV[4 * j + 2])
    end
    common = false
  end
end
if common then
  for i = 1, n do
    if moves then
      if n > 1 then
        local kept = stored[3 + n + i]
        local colon = find(kept, ':', 1, true)
        oldest, expires = sub(kept, 1, colon - 1), sub(kept, colon + 1)
        cutoff, leaves = span(ARGV[4 * i - 1], now)
      end
      if expires - leaves < 0 then
        -- The expiry rule of prelude.lua, for a newest entry at now; the set keeps
        -- its entries longer (ARGV[2]).
        local slack = math.min(math.floor((leaves - now) / 10), SLACK_MAX)
        local ttl = math.ceil((leaves - now + slack) / 1000)
        call('PEXPIRE', KEYS[3 + i], ttl)
        call('SET', KEYS[3 + n + i], string.format('%s:%d', oldest, leaves + slack), 'PX', ttl)
        local h = helpers()
        local held = h.holding(ARGV[2], now)
        call('PEXPIRE', KEYS[3 + 2 * n + i], math.max(ttl, h.set_ttl(held, now, now)))
      end
    end
    call('INCRBY', KEYS[3 + i], ARGV[4 * i + 1])
  end
  -- One concatenation, one new string, for one part or two (a bucket with a limit).
  if n == 1 then
    return GRANTED_NOW .. ' ' .. epoch .. ' ' .. t[1] .. ' ' .. t[2] .. ' ' .. stored[4]
      .. ' ' .. stored[5]
  elseif n == 2 then
    return GRANTED_NOW .. ' ' .. epoch .. ' ' .. t[1] .. ' ' .. t[2] .. ' ' .. stored[4]
      .. ' ' .. stored[6] .. ' ' .. stored[5] .. ' ' .. stored[7]
  end
  local out = GRANTED_NOW .. ' ' .. epoch .. ' ' .. t[1] .. ' ' .. t[2]
  for i = 1, n do
    out = out .. ' ' .. stored[3 + i] .. ' ' .. stored[3 + n + i]
  end
  return out
end

-- Every other case: eviction, a first entry, a denial, a duplicate, a replay.
local h = helpers()
local units_of, first_after, newest_in = h.units_of, h.first_after, h.newest_in
local units_between, keep, oldest_of = h.units_between, h.keep, h.oldest_of
local forced = age ~= nil
age = tonumber(age)
local held, pruned = h.holding(ARGV[2], now)
local parts = {}
for i = 1, n do
  local b = 4 * i - 1
  local units = tonumber(ARGV[b + 2])
  local p = {
    tkey = KEYS[3 + i], okey = KEYS[3 + n + i], zkey = KEYS[3 + 2 * n + i],
    max = tonumber(ARGV[b + 1]) + units, units = units, held = held,
    -- The member as the client wrote it, units first: joining the number p.units
    -- into text here would write 15 digits or more as "1.1258999068427e+15", a
    -- member no client looks for and no count reads back.
    member = ARGV[b + 3],
  }
  -- An entry made at `at` leaves at p.stop (a calendar day) or at + p.window.
  local _
  p.cutoff, _, p.stop, p.window = span(ARGV[b], now)
  local total, oldest, expires = tonumber(stored[3 + i]), oldest_of(stored[3 + n + i])
  local cutoff = p.cutoff
  local went_back = oldest and h.went_back(p, expires, now)
  if not (total and oldest and oldest > cutoff) or went_back then
    -- Something left the window, or the keys beside the set are gone (first entry,
    -- idle expiry, deleted by hand) or of the older layout, or TIME went back since
    -- they were written (what a clock that ran ahead evicted is in the window again):
    -- take what left off the total, or count the window again, and drop what is no
    -- longer kept.
    if total and oldest and not went_back then
      total = total - units_between(p.zkey, oldest, cutoff)
    else
      total = units_between(p.zkey, '(' .. string.format('%d', cutoff), '+inf')
    end
    call('ZREMRANGEBYSCORE', p.zkey, '-inf', '(' .. string.format('%d', pruned))
    oldest = first_after(p.zkey, cutoff)
    if oldest and total > 0 then
      keep(p, total, oldest, newest_in(p.zkey), now)
    else
      total, oldest = 0, nil
      call('DEL', p.tkey, p.okey)
    end
  end
  p.total, p.oldest = total, oldest
  parts[i] = p
end

-- The reply; `newest` is known after a live insert, read otherwise.
local function reply(code, blocked_wait, fits, newest)
  local out = {code, blocked_wait, epoch, now}
  for i = 1, n do
    local p = parts[i]
    local f = fits and fits[i]
    local next_free, empty_in = -1, -1
    if p.oldest then
      next_free = (p.stop or p.oldest + p.window) - now
      empty_in = (p.stop or (newest or newest_in(p.zkey)) + p.window) - now
    end
    local k = #out
    out[k + 1], out[k + 2], out[k + 3] = p.total, f and f[1] or FIT_NOW, f and f[2] or 0
    out[k + 4], out[k + 5] = next_free, empty_in
  end
  return out
end

if not forced then
  local until_us = tonumber(stored[1])
  if until_us and until_us > now then
    return reply(BLOCKED, until_us - now, nil, nil)
  end
end

-- Whether part p's window counts this charge already: its member is there, made
-- after the cutoff. One kept from before the cutoff is the same id charged again
-- once it left the window, which counts anew.
local function counts(p)
  local at = call('ZSCORE', p.zkey, p.member)
  return at ~= false and at ~= nil and tonumber(at) > p.cutoff
end

-- When enough units leave for this charge to fit: walk from the oldest entry only
-- as far as the units it needs.
local function wait_for(p)
  local need = p.total + p.units - p.max
  local freed, start = 0, 0
  while true do
    local batch = call('ZRANGEBYSCORE', p.zkey, '(' .. string.format('%d', p.cutoff),
    '+inf', 'WITHSCORES', 'LIMIT', start, 100)
    if #batch == 0 then return (p.stop or now + p.window) - now end
    for j = 1, #batch, 2 do
      freed = freed + units_of(batch[j])
      if freed >= need then
        return (p.stop or tonumber(batch[j + 1]) + p.window) - now
      end
    end
    start = start + 100
  end
end

local denied = false
if not forced then
  for i = 1, n do
    local p = parts[i]
    if p.total + p.units > p.max then denied = true end
  end
end

if denied then
  -- Denied, unless this very charge was recorded before (a retry after a lost reply).
  for i = 1, n do
    local p = parts[i]
    if p.oldest and counts(p) then
      return reply(DUPLICATE, 0, nil, nil)
    end
  end
  local fits = {}
  for i = 1, n do
    local p = parts[i]
    if p.units > p.max then
      fits[i] = {FIT_NEVER, 0}
    elseif p.total + p.units > p.max then
      fits[i] = {FIT_AFTER, wait_for(p)}
    else
      fits[i] = {FIT_NOW, 0}
    end
  end
  return reply(DENIED, 0, fits, nil)
end

local at = now
if forced then
  at = now - age
  -- Too old for some windows: those are not written, so ZADD NX cannot say whether
  -- they hold this charge already. Ask them first.
  for i = 1, n do
    local p = parts[i]
    if at <= p.cutoff and p.oldest and counts(p) then
      return reply(DUPLICATE, 0, nil, nil)
    end
  end
end
local added = {}
for i = 1, n do
  local p = parts[i]
  if at <= p.cutoff and at > now - held then
    -- Out of the window but still kept: recorded, not counted.
    -- The set then lives as long as an entry made now is kept: never shorter than
    -- any entry it holds needs.
    call('ZADD', p.zkey, 'NX', at, p.member)
    call('PEXPIRE', p.zkey, h.set_ttl(held, now, now))
  elseif at > p.cutoff then
    if call('ZADD', p.zkey, 'NX', at, p.member) == 1 then
      -- added
    elseif not counts(p) then
      -- Kept from before the window: the same id charged again, made now.
      call('ZADD', p.zkey, 'XX', at, p.member)
    else
      -- Recorded before: undo what this call added to the other parts.
      for _, q in ipairs(added) do
        call('ZREM', q.zkey, q.member)
      end
      return reply(DUPLICATE, 0, nil, nil)
    end
    added[#added + 1] = p
  end
end
for _, p in ipairs(added) do
  p.total = p.total + p.units
  if not p.oldest or at < p.oldest then p.oldest = at end
  -- A live entry is the newest; a replayed one may not be.
  keep(p, p.total, p.oldest, forced and newest_in(p.zkey) or now, now)
end
if forced then return reply(GRANTED, 0, nil, nil) end
return reply(GRANTED, 0, nil, now)
