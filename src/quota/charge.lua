-- Decides one weighted charge against one or more sliding-window logs, atomically
-- (the key layout and helpers are in prelude.lua, prepended to this file).
--
-- KEYS[1], KEYS[2]   the budget's block key and its epoch marker
-- KEYS[2+i]          part i's running total  } each kind together, so that
-- KEYS[2+n+i]        part i's oldest time    } one MGET reads them all
-- KEYS[2+2n+i]       part i's sorted set of entries
-- ARGV[1]            "|<method>|<id>": the member's tail (the id is unique per call)
-- ARGV[2]            -1 for a live charge; otherwise the age in microseconds of a call
--                    already made (journalled or in the ledger): recorded whatever the
--                    window holds
-- ARGV[3i .. 3i+2]   part i: window (us), max, units
--
-- Returns {code, blocked_wait_us, epoch, now_us, part...}: code GRANTED, DENIED, DUPLICATE
-- (already recorded) or BLOCKED; each part is used, fit (FIT_NOW, FIT_AFTER,
-- FIT_NEVER), wait_us, next_free_us, empty_in_us (-1 for none).
--
-- The common path, a live charge that is granted, makes five calls for one part:
-- TIME, one MGET (block, epoch, every total and oldest time), ZADD NX (the duplicate
-- check and the insert in one), SET of the total with its expiry, PEXPIRE; and runs
-- as little Lua as it can, since at 20 clients the script's own work is what limits
-- throughput (BENCHMARKS.md). Eviction, denial, duplicates, replays and a first
-- entry read or write more.

local now = clock()
local tail = ARGV[1]
local age = tonumber(ARGV[2])
local forced = age >= 0
local n = (#KEYS - 2) / 3

local stored = redis.call('MGET', unpack(KEYS, 1, 2 + 2 * n))
local epoch = tonumber(stored[2])
if not epoch then
  -- A new window, or one this Redis lost: hosts that saw another epoch replay.
  epoch = now
  redis.call('SET', KEYS[2], epoch)
end

-- The common path, straight through with no tables but the reply: a live charge,
-- not blocked, every part's total and oldest entry known, nothing to evict, and
-- room for it in every part.
local common = not forced and (tonumber(stored[1]) or 0) <= now
for i = 1, n do
  if not common then break end
  local total, oldest = tonumber(stored[2 + i]), tonumber(stored[2 + n + i])
  common = total and oldest and oldest > now - tonumber(ARGV[3 * i])
    and total + tonumber(ARGV[3 * i + 2]) <= tonumber(ARGV[3 * i + 1])
end
if common then
  for i = 1, n do
    if redis.call('ZADD', KEYS[2 + 2 * n + i], 'NX', now, ARGV[3 * i + 2] .. tail) == 0 then
      -- Recorded before: undo, and let the general path below answer.
      for j = 1, i - 1 do
        redis.call('ZREM', KEYS[2 + 2 * n + j], ARGV[3 * j + 2] .. tail)
      end
      common = false
      break
    end
  end
end
if common then
  local out = {GRANTED, 0, epoch, now}
  for i = 1, n do
    local window = tonumber(ARGV[3 * i])
    local total = tonumber(stored[2 + i]) + tonumber(ARGV[3 * i + 2])
    local ttl = math.ceil(window / 1000)
    redis.call('SET', KEYS[2 + i], total, 'PX', ttl)
    redis.call('PEXPIRE', KEYS[2 + 2 * n + i], ttl)
    local k = 4 + 5 * (i - 1)
    out[k + 1], out[k + 2], out[k + 3] = total, FIT_NOW, 0
    out[k + 4], out[k + 5] = tonumber(stored[2 + n + i]) + window - now, window
  end
  return out
end

-- Every other case: eviction, a first entry, a denial, a duplicate, a replay.
local h = helpers()
local units_of, oldest_in, newest_in = h.units_of, h.oldest_in, h.newest_in
local units_until, ttl_ms = h.units_until, h.ttl_ms
local parts = {}
for i = 1, n do
  local b = 3 * i
  local p = {
    tkey = KEYS[2 + i], okey = KEYS[2 + n + i], zkey = KEYS[2 + 2 * n + i],
    window = tonumber(ARGV[b]), max = tonumber(ARGV[b + 1]), units = tonumber(ARGV[b + 2]),
  }
  local total, oldest = tonumber(stored[2 + i]), tonumber(stored[2 + n + i])
  local cutoff = now - p.window
  if not (total and oldest and oldest > cutoff) then
    -- Something left the window, or the keys beside the set are gone (first entry,
    -- idle expiry, or deleted by hand): evict, and count again what is left.
    if not total and oldest_in(p.zkey) then
      -- The total is gone while entries remain: count them once.
      total = 0
      for _, m in ipairs(redis.call('ZRANGE', p.zkey, 0, -1)) do
        total = total + units_of(m)
      end
    end
    total = (total or 0) - units_until(p.zkey, cutoff)
    redis.call('ZREMRANGEBYSCORE', p.zkey, '-inf', cutoff)
    oldest = oldest_in(p.zkey)
    if oldest and total > 0 then
      local ttl = redis.call('PTTL', p.zkey)
      if ttl > 0 then
        redis.call('SET', p.tkey, total, 'PX', ttl)
      else
        redis.call('SET', p.tkey, total)
      end
      redis.call('SET', p.okey, oldest, 'PX', ttl_ms(oldest, p.window, now))
    else
      total, oldest = 0, nil
      redis.call('DEL', p.zkey, p.tkey, p.okey)
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
      next_free = p.oldest + p.window - now
      empty_in = (newest or newest_in(p.zkey)) + p.window - now
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

-- When enough units leave for this charge to fit: walk from the oldest entry only
-- as far as the units it needs.
local function wait_for(p)
  local need = p.total + p.units - p.max
  local freed, start = 0, 0
  while true do
    local batch = redis.call('ZRANGE', p.zkey, start, start + 99, 'WITHSCORES')
    if #batch == 0 then return p.window end
    for j = 1, #batch, 2 do
      freed = freed + units_of(batch[j])
      if freed >= need then
        return tonumber(batch[j + 1]) + p.window - now
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
    if p.oldest and redis.call('ZSCORE', p.zkey, p.units .. tail) then
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
    if at <= now - p.window and p.oldest and redis.call('ZSCORE', p.zkey, p.units .. tail) then
      return reply(DUPLICATE, 0, nil, nil)
    end
  end
end
local added = {}
for i = 1, n do
  local p = parts[i]
  if at > now - p.window then
    local member = p.units .. tail
    if redis.call('ZADD', p.zkey, 'NX', at, member) == 0 then
      -- Recorded before: undo what this call added to the other parts.
      for _, q in ipairs(added) do
        redis.call('ZREM', q.zkey, q.member)
      end
      return reply(DUPLICATE, 0, nil, nil)
    end
    p.member = member
    added[#added + 1] = p
  end
end
for _, p in ipairs(added) do
  p.total = p.total + p.units
  if not p.oldest or at < p.oldest then
    p.oldest = at
    redis.call('SET', p.okey, at, 'PX', ttl_ms(at, p.window, now))
  end
  -- A live entry is the newest; a replayed one may not be. The set and its total
  -- live exactly as long as the newest entry counts.
  local ttl = ttl_ms(forced and newest_in(p.zkey) or now, p.window, now)
  redis.call('SET', p.tkey, p.total, 'PX', ttl)
  redis.call('PEXPIRE', p.zkey, ttl)
end
if forced then return reply(GRANTED, 0, nil, nil) end
return reply(GRANTED, 0, nil, now)
