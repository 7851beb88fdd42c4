package redisstore

import "github.com/redis/go-redis/v9"

// The scripts build every key from the profile prefix passed as ARGV[1], so
// all keys of a profile stay in one hash slot when the prefix carries a hash
// tag ("hermes:{profile}:"). Each runs atomically on the server: a reader
// never sees a receipt without its index entries or the reverse.

// luaHelpers is shared by the scripts. drop removes a receipt and every index
// entry that names it; now_ms reads the server clock so that index deadlines
// and key TTLs come from the same clock whatever the clients' clocks say.
const luaHelpers = `
local function drop(p, id)
  local o = redis.call('HGET', p .. 'owners', id)
  if o then
    redis.call('ZREM', p .. 's:' .. o, id)
    redis.call('ZREM', p .. 'sl:' .. o, id)
  end
  redis.call('ZREM', p .. 'idx', id)
  redis.call('HDEL', p .. 'owners', id)
  redis.call('DEL', p .. 'r:' .. id)
end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`

// writeScript stores a batch of receipts with their index entries, then
// trims the profile to its cap, oldest written first. The whole batch is one
// atomic step; batching is what lets the store keep up with plain SETs.
//
// ARGV: prefix, max retained, then per receipt seven values: id, owner,
// json, finish ms, ttl ms, mode ("put" or "create"), written ms ("0" for the
// server's now). Returns per receipt 1 when written, 0 when mode is create
// and the receipt exists.
var writeScript = redis.NewScript(luaHelpers + `
local p, max = ARGV[1], tonumber(ARGV[2])
local owners = p .. 'owners'
local now = now_ms()
local out = {}
for i = 3, #ARGV, 7 do
  local id, owner, body, score, ttl, mode, wrote = ARGV[i], ARGV[i+1], ARGV[i+2], ARGV[i+3], ARGV[i+4], ARGV[i+5], ARGV[i+6]
  local rk = p .. 'r:' .. id
  if mode == 'create' and redis.call('EXISTS', rk) == 1 then
    out[#out + 1] = 0
  else
    local old = redis.call('HGET', owners, id)
    if old ~= owner then
      if old then
        redis.call('ZREM', p .. 's:' .. old, id)
        redis.call('ZREM', p .. 'sl:' .. old, id)
      end
      redis.call('HSET', owners, id, owner)
      redis.call('ZADD', p .. 'sl:' .. owner, 0, id)
    end
    redis.call('SET', rk, body, 'PX', ttl)
    redis.call('ZADD', p .. 's:' .. owner, score, id)
    if wrote == '0' then
      wrote = now
    end
    redis.call('ZADD', p .. 'idx', wrote, id)
    out[#out + 1] = 1
  end
end
local n = redis.call('ZCARD', p .. 'idx')
if n > max then
  for _, v in ipairs(redis.call('ZRANGE', p .. 'idx', 0, n - max - 1)) do
    drop(p, v)
  end
end
return out
`)

// resolveScript finds the live receipts whose id starts with a prefix among
// the given owners, through each owner's lexicographic index: O(log n) per
// owner, never a scan of the keyspace. Index entries whose receipt has gone
// (expired or evicted) are removed on the way.
//
// ARGV: prefix, id prefix, owner... Returns {} for no match, {id, json} for
// exactly one, {id1, false, id2} when ambiguous.
var resolveScript = redis.NewScript(luaHelpers + `
local p, pre = ARGV[1], ARGV[2]
local found = nil
for i = 3, #ARGV do
  local o = ARGV[i]
  for _, id in ipairs(redis.call('ZRANGEBYLEX', p .. 'sl:' .. o, '[' .. pre, '[' .. pre .. '\255')) do
    if redis.call('EXISTS', p .. 'r:' .. id) == 1 then
      if found and found ~= id then
        return {found, false, id}
      end
      found = id
    else
      redis.call('ZREM', p .. 's:' .. o, id)
      redis.call('ZREM', p .. 'sl:' .. o, id)
      drop(p, id)
    end
  end
end
if not found then
  return {}
end
return {found, redis.call('GET', p .. 'r:' .. found)}
`)

// cleanScript removes the index entries of receipts that have gone, for ids
// a reader found listed but absent. A receipt written again meanwhile stays.
//
// ARGV: prefix, id... Returns the number removed.
var cleanScript = redis.NewScript(luaHelpers + `
local p, n = ARGV[1], 0
for i = 2, #ARGV do
  if redis.call('EXISTS', p .. 'r:' .. ARGV[i]) == 0 then
    drop(p, ARGV[i])
    n = n + 1
  end
end
return n
`)

// sweepScript removes up to a batch of index entries of receipts written
// before a cutoff (now less the retention) whose keys are gone. Returns
// {examined, removed}; a receipt still alive (written by a store with a
// longer retention) stays.
//
// ARGV: prefix, retention ms, batch size.
var sweepScript = redis.NewScript(luaHelpers + `
local p, retention, batch = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local ids = redis.call('ZRANGEBYSCORE', p .. 'idx', '-inf', now_ms() - retention, 'LIMIT', 0, batch)
local removed = 0
for _, id in ipairs(ids) do
  if redis.call('EXISTS', p .. 'r:' .. id) == 0 then
    drop(p, id)
    removed = removed + 1
  end
end
return {#ids, removed}
`)
