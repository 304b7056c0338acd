-- Decides one weighted charge against one or more sliding-window logs, atomically
-- (the key layout and helpers are in prelude.lua, prepended to this file).
--
-- KEYS[1], KEYS[2]   the budget's block key and its epoch marker
-- KEYS[2+i]          part i's running total (all totals together, for one MGET)
-- KEYS[2+n+i]        part i's sorted set of entries
-- ARGV[1], ARGV[2]   the charge id (unique per call) and the method
-- ARGV[3]            -1 for a live charge; otherwise the age in microseconds of a call
--                    already made (journalled or in the ledger): recorded whatever the
--                    window holds
-- ARGV[3i+1 .. 3i+3] part i: window (us), max, units
--
-- Returns {code, blocked_wait_us, epoch, part...}: code GRANTED, DENIED, DUPLICATE
-- (already recorded) or BLOCKED; each part is used, fit (FIT_NOW, FIT_AFTER,
-- FIT_NEVER), wait_us, next_free_us, empty_in_us (-1 for none).
--
-- The common path, a live charge that is granted, makes five calls for one part:
-- TIME, one MGET (block, epoch, every total with its oldest entry), ZADD NX (the
-- duplicate check and the insert in one), SET of the total with its expiry, PEXPIRE.
-- Eviction, denial, duplicates and replays read more.

local now = clock()
local id, method = ARGV[1], ARGV[2]
local age = tonumber(ARGV[3])
local forced = age >= 0
local n = (#KEYS - 2) / 2

local stored = redis.call('MGET', unpack(KEYS, 1, 2 + n))
local epoch = tonumber(stored[2])
if not epoch then
  -- A new window, or one this Redis lost: hosts that saw another epoch replay.
  epoch = now
  redis.call('SET', KEYS[2], epoch)
end

local parts = {}
for i = 1, n do
  local b = 3 * i
  local p = {
    tkey = KEYS[2 + i], zkey = KEYS[2 + n + i],
    window = tonumber(ARGV[b + 1]), max = tonumber(ARGV[b + 2]), units = tonumber(ARGV[b + 3]),
  }
  local total, oldest = read_total(stored[2 + i])
  if not total or not oldest then
    oldest = oldest_in(p.zkey)
    if not oldest then
      total = 0
    elseif not total then
      -- The total is gone while entries remain (deleted by hand): count them once.
      total = 0
      for _, m in ipairs(redis.call('ZRANGE', p.zkey, 0, -1)) do
        total = total + units_of(m)
      end
    end
    if oldest then
      local ttl = redis.call('PTTL', p.zkey)
      if ttl > 0 then
        redis.call('SET', p.tkey, total_value(total, oldest), 'PX', ttl)
      else
        redis.call('SET', p.tkey, total_value(total, oldest))
      end
    end
  end
  -- Evict only when the oldest entry has left the window.
  local cutoff = now - p.window
  if oldest and oldest <= cutoff then
    total = total - units_until(p.zkey, cutoff)
    redis.call('ZREMRANGEBYSCORE', p.zkey, '-inf', cutoff)
    oldest = oldest_in(p.zkey)
    if oldest and total > 0 then
      redis.call('SET', p.tkey, total_value(total, oldest), 'KEEPTTL')
    else
      total, oldest = 0, nil
      redis.call('DEL', p.zkey, p.tkey)
    end
  end
  p.total, p.oldest = total, oldest
  parts[i] = p
end

-- next_free and empty_in; `newest` is known after a live insert, read otherwise.
local function reply(code, blocked_wait, fits, newest)
  local out = {code, blocked_wait, epoch}
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

local fits
if not forced then
  for i = 1, n do
    local p = parts[i]
    if p.units > p.max or p.total + p.units > p.max then
      fits = fits or {}
    end
  end
end

if fits then
  -- Denied, unless this very charge was recorded before (a retry after a lost reply).
  for i = 1, n do
    local p = parts[i]
    if p.oldest and redis.call('ZSCORE', p.zkey, p.units .. '|' .. method .. '|' .. id) then
      return reply(DUPLICATE, 0, nil, nil)
    end
  end
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
if forced then at = now - age end
local added = {}
for i = 1, n do
  local p = parts[i]
  if at > now - p.window then
    local member = p.units .. '|' .. method .. '|' .. id
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
  if not p.oldest or at < p.oldest then p.oldest = at end
  -- A live entry is the newest; a replayed one may not be.
  local newest = now
  if forced then newest = newest_in(p.zkey) end
  -- Both keys live exactly as long as the newest entry counts.
  local ttl_ms = math.ceil((newest + p.window - now) / 1000)
  redis.call('SET', p.tkey, total_value(p.total, p.oldest), 'PX', ttl_ms)
  redis.call('PEXPIRE', p.zkey, ttl_ms)
end
if forced then return reply(GRANTED, 0, nil, nil) end
return reply(GRANTED, 0, nil, now)
