package redisstore

import (
	"github.com/redis/go-redis/v9"

	"github.com/hermesrun/hermes/internal/redisdb"
)

// Every script declares the keys it knows before it runs: KEYS[1] is the
// profile's index of every receipt ("P idx"), KEYS[2] its owners hash,
// KEYS[3] its listing by start ("P started"), and the keys of the receipts,
// owners and wakes a call names follow (see
// scriptKeys). Keys a script finds only in the data (the receipts a trim
// drops, a receipt's former owner) it builds from the profile prefix passed
// as ARGV[1] and the key families of package redisdb, which names every key;
// the prefix's hash tag ("hermes:{profile}:") keeps them all in the declared
// keys' cluster slot. Each runs atomically on the server: a reader never
// sees a receipt without its index entries or the reverse.
//
// Inside a script each redis.call costs about as much server time as a whole
// SET from a client, so the scripts touch every structure once per batch
// with variadic commands, not once per receipt.

// luaHelpers is shared by the scripts.
//
// bulk runs a variadic command over a long argument list in chunks, below
// Lua's limit on unpack. drop removes receipts with every index entry that
// names them. now_ms reads the server clock, so that index times and key
// TTLs come from one clock whatever the clients' clocks say.
var luaHelpers = redisdb.LuaFamilies() + `
local IDX, OWNERS, STARTED = KEYS[1], KEYS[2], KEYS[3]
local function bulk(cmd, key, args)
  for i = 1, #args, 4000 do
    redis.call(cmd, key, unpack(args, i, math.min(i + 3999, #args)))
  end
end
local function drop(p, ids)
  if #ids == 0 then
    return
  end
  local owners = OWNERS
  local by = {}
  for i = 1, #ids, 4000 do
    local chunk = {unpack(ids, i, math.min(i + 3999, #ids))}
    local got = redis.call('HMGET', owners, unpack(chunk))
    for j, id in ipairs(chunk) do
      local o = got[j]
      if o then
        by[o] = by[o] or {}
        table.insert(by[o], id)
      end
    end
  end
  for o, list in pairs(by) do
    bulk('ZREM', p .. S .. o, list)
    bulk('ZREM', p .. SL .. o, list)
    bulk('ZREM', p .. C .. o, list)
    bulk('ZREM', p .. CL .. o, list)
  end
  local keys = {}
  for i, id in ipairs(ids) do
    keys[i] = p .. R .. id
  end
  bulk('ZREM', IDX, ids)
  bulk('ZREM', STARTED, ids)
  bulk('HDEL', owners, ids)
  for i = 1, #keys, 4000 do
    redis.call('DEL', unpack(keys, i, math.min(i + 3999, #keys)))
  end
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
// ARGV: prefix, max retained, then per receipt nine values: id, owner,
// json, finish ms, ttl ms, mode ("put" or "create"), written ms ("0" for the
// server's now), notify ("1": a create leaves a pending completion in
// "P c:<owner>"), start ms (the score of the listings "P s:<owner>" and
// "P started"). Returns per receipt 1 when written, 0 when mode is create
// and the receipt exists (already, or from earlier in the batch).
var writeScript = redis.NewScript(luaHelpers + `
-- pair appends a score and a member to the list t[key], made on first use.
local function pair(t, key, score, member)
  local l = t[key]
  if not l then
    l = {}
    t[key] = l
  end
  l[#l + 1] = score
  l[#l + 1] = member
end
local p, max = ARGV[1], tonumber(ARGV[2])
local owners, pr = OWNERS, p .. R
local now = now_ms()
local ids = {}
for i = 3, #ARGV, 9 do
  ids[#ids + 1] = ARGV[i]
end
local stored = redis.call('HMGET', owners, unpack(ids))
local out, final, order, wrote, pending = {}, {}, {}, {}, {}
for i = 3, #ARGV, 9 do
  local id, mode = ARGV[i], ARGV[i + 5]
  local ok
  if mode == 'create' then
    ok = redis.call('SET', pr .. id, ARGV[i + 2], 'PX', ARGV[i + 4], 'NX')
  else
    ok = redis.call('SET', pr .. id, ARGV[i + 2], 'PX', ARGV[i + 4])
  end
  if ok then
    local w = ARGV[i + 6]
    if w == '0' then
      w = now
    end
    if not final[id] then
      order[#order + 1] = id
    end
    final[id] = i
    wrote[i] = w
    if mode == 'create' and ARGV[i + 7] == '1' then
      pending[#pending + 1] = i
    end
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
if #order > 0 then
  local before = {}
  for j, id in ipairs(ids) do
    before[id] = stored[j]
  end
  local s, sl, hs, ix, st = {}, {}, {}, {}, {}
  for _, id in ipairs(order) do
    local i = final[id]
    local owner = ARGV[i + 1]
    local old = before[id]
    if old ~= owner then
      if old then
        redis.call('ZREM', p .. S .. old, id)
        redis.call('ZREM', p .. SL .. old, id)
      end
      hs[#hs + 1] = id
      hs[#hs + 1] = owner
      pair(sl, owner, 0, id)
    end
    pair(s, owner, ARGV[i + 8], id)
    ix[#ix + 1] = wrote[i]
    ix[#ix + 1] = id
    st[#st + 1] = ARGV[i + 8]
    st[#st + 1] = id
  end
  for o, list in pairs(s) do
    bulk('ZADD', p .. S .. o, list)
  end
  for o, list in pairs(sl) do
    bulk('ZADD', p .. SL .. o, list)
  end
  if #hs > 0 then
    bulk('HSET', owners, hs)
  end
  bulk('ZADD', IDX, ix)
  bulk('ZADD', STARTED, st)
  local c, ttl = {}, {}
  for _, i in ipairs(pending) do
    local o = ARGV[i + 1]
    pair(c, o, ARGV[i + 3], ARGV[i])
    ttl[o] = math.max(ttl[o] or 0, tonumber(ARGV[i + 4]))
  end
  for o, list in pairs(c) do
    bulk('ZADD', p .. C .. o, list)
    redis.call('PEXPIRE', p .. C .. o, ttl[o])
  end
  local n = redis.call('ZCARD', IDX)
  if n > max then
    drop(p, redis.call('ZRANGE', IDX, 0, n - max - 1))
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
local found, gone = nil, {}
for i = 3, #ARGV do
  local o = ARGV[i]
  for _, id in ipairs(redis.call('ZRANGEBYLEX', p .. SL .. o, '[' .. pre, '[' .. pre .. '\255')) do
    if redis.call('EXISTS', p .. R .. id) == 1 then
      if found and found ~= id then
        drop(p, gone)
        return {found, false, id}
      end
      found = id
    else
      -- Remove from this owner's indices by name too, so that even an
      -- entry the owners hash lost cannot linger.
      redis.call('ZREM', p .. SL .. o, id)
      redis.call('ZREM', p .. S .. o, id)
      gone[#gone + 1] = id
    end
  end
end
drop(p, gone)
if not found then
  return {}
end
return {found, redis.call('GET', p .. R .. found)}
`)

// cleanScript removes the index entries of receipts that have gone, for ids
// a reader found listed but absent. A receipt written again meanwhile stays.
//
// ARGV: prefix, id... Returns the number removed.
var cleanScript = redis.NewScript(luaHelpers + `
local p, gone = ARGV[1], {}
for i = 2, #ARGV do
  if redis.call('EXISTS', p .. R .. ARGV[i]) == 0 then
    gone[#gone + 1] = ARGV[i]
  end
end
drop(p, gone)
return #gone
`)

// deleteScript removes one receipt with its index entries, pending
// completion and wakes. Returns 1 if it was there. ARGV: prefix, id.
var deleteScript = redis.NewScript(luaHelpers + `
local p, id = ARGV[1], ARGV[2]
local was = redis.call('EXISTS', p .. R .. id)
local owner = redis.call('HGET', OWNERS, id)
drop(p, {id})
if owner then
  local mine = id .. '.out'
  for _, set in ipairs({p .. WC .. owner, p .. WCL .. owner}) do
    for _, key in ipairs(redis.call('ZRANGE', set, 0, -1)) do
      if string.sub(key, 1, #mine) == mine then
        redis.call('ZREM', set, key)
        redis.call('DEL', p .. WB .. key)
      end
    end
  end
end
return was
`)

// sweepScript removes up to a batch of index entries of receipts written
// before a cutoff (now less the retention) whose keys are gone. Returns
// {examined, removed}; a receipt still alive (written by a store with a
// longer retention) stays.
//
// ARGV: prefix, retention ms, batch size.
var sweepScript = redis.NewScript(luaHelpers + `
local p, retention, batch = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local ids = redis.call('ZRANGEBYSCORE', IDX, '-inf', now_ms() - retention, 'LIMIT', 0, batch)
local gone = {}
for _, id in ipairs(ids) do
  if redis.call('EXISTS', p .. R .. id) == 0 then
    gone[#gone + 1] = id
  end
end
drop(p, gone)
return {#ids, #gone}
`)

// takeScript removes and returns the pending notices of the given
// owners, completions or wakes: the bodies they name (a completion's
// receipt, a wake's own), skipping those that expired. It is one atomic
// step, so concurrent takers never share one. With a lease, each taken
// notice moves to the leased set ("P cl:O", "P wcl:O"), scored by when its
// lease ends; leases that have ended move back to the pending set first,
// so an unacknowledged notice is taken again.
//
// ARGV: prefix, lease ms (0: take for good), the pending set's infix, the
// leased set's, the bodies', owner... Returns the bodies.
var takeScript = redis.NewScript(luaHelpers + `
local p, lease, out = ARGV[1], tonumber(ARGV[2]), {}
local pending, leasedIn, bodies = ARGV[3], ARGV[4], ARGV[5]
local now = now_ms()
for i = 6, #ARGV do
  local key, leased = p .. pending .. ARGV[i], p .. leasedIn .. ARGV[i]
  local back = redis.call('ZRANGEBYSCORE', leased, '-inf', now)
  if #back > 0 then
    redis.call('ZREMRANGEBYSCORE', leased, '-inf', now)
    local list = {}
    for _, id in ipairs(back) do
      list[#list + 1] = now
      list[#list + 1] = id
    end
    bulk('ZADD', key, list)
    redis.call('PEXPIRE', key, math.max(redis.call('PTTL', leased), 1000))
  end
  local ids = redis.call('ZRANGE', key, 0, -1)
  if #ids > 0 then
    local ttl = redis.call('PTTL', key)
    redis.call('DEL', key)
    local list = {}
    for _, id in ipairs(ids) do
      local body = redis.call('GET', p .. bodies .. id)
      if body then
        out[#out + 1] = body
        list[#list + 1] = now + lease
        list[#list + 1] = id
      end
    end
    if lease > 0 and #list > 0 then
      bulk('ZADD', leased, list)
      redis.call('PEXPIRE', leased, math.max(ttl, redis.call('PTTL', leased), lease + 1000))
    end
  end
end
return out
`)

// addWakeScript records a wake: its body, if absent, and its key in the
// owner's pending wakes, whose TTL it pushes out to the body's. Returns 1
// when the wake is new.
//
// ARGV: prefix, owner, key, body, ttl ms.
var addWakeScript = redis.NewScript(luaHelpers + `
local p, owner, key, body, ttl = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
if not redis.call('SET', p .. WB .. key, body, 'PX', ttl, 'NX') then
  return 0
end
local set = p .. WC .. owner
redis.call('ZADD', set, now_ms(), key)
redis.call('PEXPIRE', set, math.max(redis.call('PTTL', set), ttl))
return 1
`)
