-- Decides one weighted charge against one or more sliding-window logs, atomically.
--
-- KEYS[1]            the budget's block key (set while the upstream says no)
-- KEYS[2i], [2i+1]   part i: its sorted set of entries and its running total
-- ARGV[1], ARGV[2]   the charge id (unique per call) and the method
-- ARGV[3]            -1 for a live charge; otherwise the age in microseconds of a call
--                    already made (a journalled call): recorded whatever the window holds
-- ARGV[3i+1 .. 3i+3] part i: window (us), max, units
--
-- One entry per call and policy: member "<units>|<method>|<id>", score = time (us).
-- The total of each window is kept beside it, so a decision never re-adds the window;
-- expired entries are subtracted as they are evicted. The clock is Redis TIME, never
-- a client's, so hosts with skewed clocks share one window truthfully.
--
-- Returns {code, blocked_wait_us, part...} where code is 0 granted, 1 denied,
-- 2 duplicate (already recorded), 3 blocked; each part is used, max, fit (0 now,
-- 1 after, 2 never), wait_us, next_free_us, empty_in_us (-1 for none).

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local id, method = ARGV[1], ARGV[2]
local age = tonumber(ARGV[3])
local forced = age >= 0
local nparts = (#KEYS - 1) / 2

local function us(n)
  return string.format('%.0f', n)
end

local function units_of(member)
  return tonumber(string.match(member, '^(%d+)|')) or 0
end

-- The block and every running total in one read: every key shares one hash tag.
local read = {KEYS[1]}
for i = 1, nparts do
  read[#read + 1] = KEYS[2 * i + 1]
end
local stored = redis.call('MGET', unpack(read))

local parts = {}
for i = 1, nparts do
  local b = 3 + (i - 1) * 3
  local p = {
    zkey = KEYS[2 * i], tkey = KEYS[2 * i + 1],
    window = tonumber(ARGV[b + 1]), max = tonumber(ARGV[b + 2]), units = tonumber(ARGV[b + 3]),
    total = 0,
  }
  p.member = ARGV[b + 3] .. '|' .. method .. '|' .. id
  local first = redis.call('ZRANGE', p.zkey, 0, 0, 'WITHSCORES')
  if #first > 0 then
    p.oldest = tonumber(first[2])
    if stored[i + 1] then
      p.total = tonumber(stored[i + 1])
    else
      -- The total is gone while entries remain (deleted by hand): count them once
      -- and keep the count.
      for _, m in ipairs(redis.call('ZRANGE', p.zkey, 0, -1)) do
        p.total = p.total + units_of(m)
      end
      local ttl = redis.call('PTTL', p.zkey)
      if ttl > 0 then
        redis.call('SET', p.tkey, us(p.total), 'PX', ttl)
      else
        redis.call('SET', p.tkey, us(p.total))
      end
    end
    -- Evict only when the oldest entry has left the window.
    local cutoff = now - p.window
    if p.oldest <= cutoff then
      for _, m in ipairs(redis.call('ZRANGEBYSCORE', p.zkey, '-inf', us(cutoff))) do
        p.total = p.total - units_of(m)
      end
      redis.call('ZREMRANGEBYSCORE', p.zkey, '-inf', us(cutoff))
      first = redis.call('ZRANGE', p.zkey, 0, 0, 'WITHSCORES')
      if #first > 0 and p.total > 0 then
        p.oldest = tonumber(first[2])
        redis.call('SET', p.tkey, us(p.total), 'KEEPTTL')
      else
        p.total, p.oldest = 0, nil
        redis.call('DEL', p.zkey, p.tkey)
      end
    end
  end
  parts[i] = p
end

local function edges(p)
  if not p.oldest then
    return -1, -1
  end
  local newest = p.newest
  if not newest then
    newest = tonumber(redis.call('ZRANGE', p.zkey, -1, -1, 'WITHSCORES')[2])
  end
  return p.oldest + p.window - now, newest + p.window - now
end

local function reply(code, blocked_wait, fits)
  local out = {code, blocked_wait}
  for i, p in ipairs(parts) do
    local next_free, empty_in = edges(p)
    local f = fits and fits[i] or {0, 0}
    for _, v in ipairs({p.total, p.max, f[1], f[2], next_free, empty_in}) do
      out[#out + 1] = v
    end
  end
  return out
end

if not forced then
  local until_us = tonumber(stored[1] or '0')
  if until_us > now then
    return reply(3, until_us - now, nil)
  end
end

for _, p in ipairs(parts) do
  if p.oldest and redis.call('ZSCORE', p.zkey, p.member) then
    return reply(2, 0, nil)
  end
end

-- When enough units leave for this charge to fit: walk from the oldest entry only
-- as far as the units it needs.
local function fit(p)
  if forced then return {0, 0} end
  if p.units > p.max then return {2, 0} end
  local need = p.total + p.units - p.max
  if need <= 0 then return {0, 0} end
  local freed, start = 0, 0
  while true do
    local batch = redis.call('ZRANGE', p.zkey, start, start + 99, 'WITHSCORES')
    if #batch == 0 then return {1, p.window} end
    for j = 1, #batch, 2 do
      freed = freed + units_of(batch[j])
      if freed >= need then
        return {1, tonumber(batch[j + 1]) + p.window - now}
      end
    end
    start = start + 100
  end
end

local fits, denied = {}, false
for i, p in ipairs(parts) do
  fits[i] = fit(p)
  if fits[i][1] ~= 0 then denied = true end
end
if denied then
  return reply(1, 0, fits)
end

local at = now
if forced then at = now - age end
for _, p in ipairs(parts) do
  if at > now - p.window then
    redis.call('ZADD', p.zkey, us(at), p.member)
    p.total = p.total + p.units
    if not p.oldest or at < p.oldest then p.oldest = at end
    -- A live entry is the newest; a replayed one may not be.
    if not forced then p.newest = now end
    local _, empty_in = edges(p)
    -- Both keys live exactly as long as the newest entry counts.
    local ttl_ms = math.ceil(empty_in / 1000)
    redis.call('SET', p.tkey, us(p.total), 'PX', ttl_ms)
    redis.call('PEXPIRE', p.zkey, ttl_ms)
  end
end
return reply(0, 0, fits)
