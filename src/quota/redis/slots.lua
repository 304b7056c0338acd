-- The fleet's slot leases and records (docs/budget.md, "A fleet: slot leases"), one
-- operation per call, decided atomically on Redis's clock (TIME), so that every host
-- agrees on which lease is live.
--
-- Keys of one budget, under its hash tag `trendsync:{<budget.key>}`:
--   :slot:<region>:<start>  one slot's record, a JSON object (below), kept at least
--                           36 days after the slot's end (PX): coverage reads it long
--                           after the lease is over, so a lease lapses by its
--                           `until_ms` against TIME, never by the key's expiry
--   :fence                  the fencing counter: every claim takes the next token
--   :epoch                  the window's epoch marker (prelude.lua), which seeds the
--                           counter when Redis lost it
--
-- A record is one of
--   {"state":"held","token":T,"host":H,"run":R,"until_ms":U,"since_ms":S,
--    "took_over_from":{"host":H,"run":R,"token":T}}        (took_over_from optional)
--   {"state":"done","token":T,"host":H,"run":R,"outcome":"complete","at_ms":A}
--   {"state":"missed","reason":W,"host":H,"run":R,"token":T,"at_ms":A,"detail":D}
--                                                           (host .. detail optional)
-- Numbers are written with %d (Lua's cjson would round a token of 16 digits); text
-- through cjson.encode, so a host name is always quoted and escaped.
--
-- KEYS[1]  the slot's record (every op but 'read' and 'time'); KEYS[2] the fence,
--          KEYS[3] the epoch marker ('claim')
-- 'read':  KEYS are the records of the slots read; 'time': KEYS[1] any key of the
--          budget, so that a Cluster asks the node whose clock the other ops read
-- ARGV[1]  the op; the rest per op, below
--
-- Returns {code, now_us, token, record}: the record as written, or as found (''
-- when none); 'read' returns {now_us, {record or false, ...}}.

local call = redis.call
local t = call('TIME')
local now_us = t[1] * 1000000 + t[2]
local now_ms = math.floor(now_us / 1000)
local op = ARGV[1]

local function int(n) return string.format('%d', n) end
local function text(s) return cjson.encode(s) end

if op == 'time' then
  return {now_us}
end
if op == 'read' then
  if #KEYS == 0 then return {now_us, {}} end
  return {now_us, call('MGET', unpack(KEYS))}
end

local function held(token, host, run, until_ms, since_ms, prev)
  local j = '{"state":"held","token":' .. int(token) .. ',"host":' .. text(host)
    .. ',"run":' .. text(run) .. ',"until_ms":' .. int(until_ms)
    .. ',"since_ms":' .. int(since_ms)
  if prev then
    j = j .. ',"took_over_from":{"host":' .. text(prev.host) .. ',"run":' .. text(prev.run)
      .. ',"token":' .. int(prev.token) .. '}'
  end
  return j .. '}'
end

local function done(token, host, run)
  return '{"state":"done","token":' .. int(token) .. ',"host":' .. text(host)
    .. ',"run":' .. text(run) .. ',"outcome":"complete","at_ms":' .. int(now_ms) .. '}'
end

local function missed(reason, host, run, token, detail)
  local j = '{"state":"missed","reason":' .. text(reason) .. ',"at_ms":' .. int(now_ms)
  if host and host ~= '' then j = j .. ',"host":' .. text(host) end
  if run and run ~= '' then j = j .. ',"run":' .. text(run) end
  if token then j = j .. ',"token":' .. int(token) end
  if detail and detail ~= '' then j = j .. ',"detail":' .. text(detail) end
  return j .. '}'
end

-- ARGV[2] the slot's end (ms), ARGV[3] how long a record is kept after it (ms).
local end_ms = tonumber(ARGV[2])
local keep = math.max(end_ms - now_ms, 0) + tonumber(ARGV[3])
local raw = call('GET', KEYS[1])
local rec = nil
if raw then
  local ok, decoded = pcall(cjson.decode, raw)
  if not ok or type(decoded) ~= 'table' then
    return redis.error_reply('ERR the slot record ' .. KEYS[1] .. ' is not a JSON object; delete it')
  end
  rec = decoded
else
  raw = ''
end

local function put(j)
  call('SET', KEYS[1], j, 'PX', keep)
end

local function lapsed(r) return r.state == 'held' and r.until_ms < now_ms end

if op == 'claim' then
  -- ARGV[4] host, [5] run id, [6] lease (ms), [7] the largest token this host has
  -- recorded (its floor: the counter always goes past it)
  local host, run, lease, floor = ARGV[4], ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
  if rec and rec.state == 'done' then return {'done', now_us, rec.token, raw} end
  if now_ms >= end_ms then
    if rec and lapsed(rec) then
      -- Lapsed with no done mark, and nobody can take it over any more.
      local j = missed('taken_over_late', rec.host, rec.run, rec.token, nil)
      put(j)
      return {'ended', now_us, 0, j}
    end
    return {'ended', now_us, 0, raw}
  end
  if rec and rec.state == 'held' then
    if rec.host == host and rec.run == run then
      -- This very claim, sent again (a failover): the same lease, renewed.
      local j = held(rec.token, host, run, now_ms + lease, rec.since_ms, rec.took_over_from)
      put(j)
      return {'claimed', now_us, rec.token, j}
    end
    if not lapsed(rec) then return {'held', now_us, rec.token, raw} end
  end
  -- The next token: past the epoch of this Redis's keys and past the caller's floor,
  -- so that it only grows, also across a Redis that lost its keys.
  local fence = tonumber(call('GET', KEYS[2]))
  if not fence then
    local epoch = tonumber(call('GET', KEYS[3]))
    if not epoch then
      -- As charge.lua makes it: a new window, or one this Redis lost.
      epoch = now_us
      call('SET', KEYS[3], int(now_us))
    end
    call('SET', KEYS[2], int(math.max(epoch, floor + 1)))
  elseif fence < floor then
    call('SET', KEYS[2], int(floor))
  end
  local token = call('INCRBY', KEYS[2], 1)
  local prev = nil
  if rec and rec.state == 'held' then prev = rec end
  local j = held(token, host, run, now_ms + lease, now_ms, prev)
  if rec then
    put(j)
  else
    call('SET', KEYS[1], j, 'NX', 'PX', keep)
  end
  return {'claimed', now_us, token, j}
end

if op == 'renew' then
  -- ARGV[4] token, [5] lease (ms)
  local token, lease = tonumber(ARGV[4]), tonumber(ARGV[5])
  if not rec then
    -- Redis lost the record, and nobody claimed the slot since: the holder keeps it,
    -- by its token (its host and run are not sent with a renewal).
    local j = held(token, '', '', now_ms + lease, now_ms, nil)
    call('SET', KEYS[1], j, 'NX', 'PX', keep)
    return {'renewed', now_us, token, j}
  end
  if rec.state == 'held' and rec.token == token then
    local j = held(token, rec.host, rec.run, now_ms + lease, rec.since_ms, rec.took_over_from)
    put(j)
    return {'renewed', now_us, token, j}
  end
  return {'lost', now_us, rec.token or 0, raw}
end

if op == 'finish' then
  -- ARGV[4] token, [5] host, [6] run id, [7] outcome, [8] the missed reason it maps
  -- to, [9] detail ('' for none)
  local token, host, run, outcome = tonumber(ARGV[4]), ARGV[5], ARGV[6], ARGV[7]
  if not rec or (rec.state == 'held' and rec.token == token) then
    local j
    if outcome == 'complete' then
      j = done(token, host, run)
    else
      j = missed(ARGV[8], host, run, token, ARGV[9])
    end
    put(j)
    return {'recorded', now_us, token, j}
  end
  if rec.token == token and (rec.state == 'done'
      or (rec.state == 'missed' and rec.reason ~= 'taken_over_late')) then
    -- This very finish, sent again.
    return {'recorded', now_us, token, raw}
  end
  return {'fenced', now_us, rec.token or 0, raw}
end

if op == 'miss' then
  -- ARGV[4] reason, [5] host, [6] detail: written only over no record or a missed one,
  -- never over a lease or a done mark.
  if not rec or rec.state == 'missed' then
    local j = missed(ARGV[4], ARGV[5], nil, nil, ARGV[6])
    put(j)
    return {'missed', now_us, 0, j}
  end
  return {'kept', now_us, rec.token or 0, raw}
end

return redis.error_reply('ERR slots.lua has no op ' .. tostring(op))
