-- Records what the upstream's refusal of a bucket measured (docs/budget.md, "When the
-- upstream refuses"); the key layout and helpers are in prelude.lua, prepended to this
-- file.
--
-- KEYS[1]  the budget's records, a hash: field "<bucket>|<day>" (the upstream day's
--          midnight, us), value the units charged to the bucket that day at its first
--          refusal; expiring a few days after the last record
-- KEYS[2]  the bucket's sorted set
-- ARGV[1]  the bucket's name
-- ARGV[2]  the upstream's day, as a calendar-day window (see `span`)
-- ARGV[3]  the bucket's quota
-- ARGV[4]  how long a day's record is kept (us); the hash expires that long after
--          the last record is written
--
-- The day is the one Redis TIME falls in. The units are those of the set's entries
-- made since that midnight, whatever the bucket's window. Only the first refusal of a
-- bucket and day that finds fewer units than the quota is recorded.
--
-- Returns {1, units, day} when this call recorded the day's figure, else {0, 0, day}.

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local cutoff = span(ARGV[2], now)
local day = cutoff + 1
local keep = tonumber(ARGV[4])
local field = ARGV[1] .. '|' .. string.format('%d', day)
if redis.call('HEXISTS', KEYS[1], field) == 1 then return {0, 0, day} end

local h = helpers()
local units = 0
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. string.format('%d', cutoff), '+inf')) do
  units = units + h.units_of(m)
end
if units >= tonumber(ARGV[3]) then return {0, 0, day} end

redis.call('HSET', KEYS[1], field, string.format('%d', units))
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  local d = tonumber(string.match(f, '|(%d+)$'))
  if not d or d < day - keep then redis.call('HDEL', KEYS[1], f) end
end
redis.call('PEXPIRE', KEYS[1], math.ceil(keep / 1000))
return {1, units, day}
