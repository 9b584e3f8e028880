-- ganesha-shm fleet sync, format 2: one call per shard of the services a host counts, so that
-- every key it touches shares the shard's hash tag (one Redis Cluster slot). It sets this
-- host's count of each bucket that changed and moves the fleet's sum by the difference, so that
-- a call repeated or retried changes nothing; then it returns the sums of each service that
-- another host changed since this host last read them. Its cost is the host's own services'
-- and what changed in them, never the number of hosts.
--
-- KEYS: 1 the shard's version (a counter moved by every call that changes a sum); 2 the shard's
-- changes (a sorted set: each service scored with the version that last changed it); 3 the
-- shard's hosts (a set of host ids, for recounting); 4 this host's counts of the shard (a hash
-- of `<duration>:<counter>:<start>:<service>`); then one per service: its sums (a hash of
-- `<duration>:<counter>:<start>`, and `v`, its version).
-- ARGV: 1 this host's id; 2 what the shard's host hashes are called but the id; 3 the oldest a
-- bucket of 1 s may be and still be read by some window, in seconds (a bucket of d seconds: d
-- times that), to which the clock bound is added; 4 the clock bound in seconds; 5 the shard's
-- version this host holds ("" for none: every service is looked at); 6 seconds to keep this
-- host's hash from now ("0": as it is; it is given them anyway when it has no lifetime);
-- 7 "1" to return this host's counts of the shard (its first sync); 8 what the shard's sums
-- hashes are called but the service; then per service this host has something to send of, or
-- every service it counts when it holds no version of the shard:
--   the service; the version of its sums this host holds ("" for none); seconds to keep its
--   sums, and the shard's keys, from now ("0": as they are); n; d; then n updates of four: the
--   bucket's field (`<duration>:<counter>:<start>`), its start, the count this host last
--   published there ("" when it does not know), the new count; then d fields this host holds
--   for buckets that may have left every window: deleted from the sums and from this host's
--   counts if they have.
-- The services another host changed since the shard's version this host holds come back
-- whether they were sent or not: a steady sync costs a few commands per shard, and a busy one
-- reads what changed.
-- Reply: Redis's time (seconds), the shard's version ("lost" when it is behind the one this
-- host holds; "" when this host should look at every service), this host's counts of the shard when
-- asked (a flat field, count list, the fields with their service) else false, the services
-- not sent that another host changed (a flat list of service, version, sums, skipped), then
-- per service
-- sent either its version alone (every update applied, nothing to read), or {version, error,
-- rejected, recounted, skipped, sums}:
--   error: "" or why the service was skipped (a key of another type: its data is not ours);
--   rejected: updates of buckets stamped past Redis's time and the bound, not applied;
--   recounted: sums found wrong (lost, or below this host's count) and recounted;
--   skipped: fields of the sums hash that are not a bucket's count;
--   sums: a flat field, count list, when another host changed them, else false.

local host, host_prefix = ARGV[1], ARGV[2]
local read_for, bound, known_shard = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local keep_own, first, sums_prefix = tonumber(ARGV[6]), ARGV[7] == '1', ARGV[8]
local version_key, changes_key, hosts_key, own = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local MAX_COUNT = 268435455
-- A bucket's field: `<duration>:<counter>:<start>`, as the sidecar names it.
local BUCKET_FIELD = '^[1-9]%d*:[012]:%d+$'
-- Changes kept in the shard's sorted set: a host that last read the shard longer ago than that
-- many changes looks at every service.
local CHANGES_KEPT = 100000
-- The most fields a hash of ours is read with, the most services read as changed, the most
-- hosts a sum is recounted from: past them, what Redis holds is not ganesha-shm's (someone
-- wrote it there), and reading it would cost every service of the shard; it costs its own.
local MAX_FIELDS, MAX_CHANGED, MAX_HOSTS = 20000, 10000, 10000

local function failed(reply)
  return type(reply) == 'table' and reply.err
end

-- Stops the script with an error that names the right the ACL user lacks to run `command` on
-- `key` (Redis's own says only that the script's user may not), which the sidecar logs.
local function refused(command, key)
  local on = key and (', on the keys of its fleet such as ' .. key) or ''
  error(redis.error_reply('NOPERM fleet mode needs the right +' .. string.lower(command) .. on))
end

-- redis.pcall, but a call the ACL user may not make stops the script (the rights are checked
-- before the first call of a connection; they may be taken away since). Any other error is the
-- caller's to handle: a key of another type is data not ours.
local function call(command, ...)
  local reply = redis.pcall(command, ...)
  if failed(reply) then
    local err = reply.err
    if string.find(err, '^NOPERM') or string.find(err, "can't run this command", 1, true)
        or string.find(err, "can't access", 1, true) then
      refused(command, (...))
    end
  end
  return reply
end

local now = tonumber(call('TIME')[1])

-- At a host's first call of the shard (after each connection), every right the script needs is
-- checked before its first write: Redis keeps the writes of a script stopped half-way, and a sum
-- moved without this host's count beside it would be moved again by the next call.
if first then
  local probes = {
    { 'TIME' },
    { 'GET', KEYS[1] }, { 'INCR', KEYS[1] }, { 'EXPIRE', KEYS[1], '1' },
    { 'ZCOUNT', KEYS[2], '0', '0' }, { 'ZRANGEBYSCORE', KEYS[2], '0', '0' }, { 'ZADD', KEYS[2], '0', 'm' },
    { 'ZREMRANGEBYSCORE', KEYS[2], '0', '0' }, { 'EXPIRE', KEYS[2], '1' },
    { 'SCARD', KEYS[3] }, { 'SMEMBERS', KEYS[3] }, { 'SADD', KEYS[3], 'm' }, { 'EXPIRE', KEYS[3], '1' },
  }
  for k = 4, math.min(#KEYS, 5) do
    for _, probe in ipairs({
      { 'HMGET', KEYS[k], 'f' }, { 'HSET', KEYS[k], 'f', 'v' }, { 'HDEL', KEYS[k], 'f' }, { 'HLEN', KEYS[k] },
      { 'HGETALL', KEYS[k] }, { 'HGET', KEYS[k], 'f' }, { 'EXPIRE', KEYS[k], '1' },
    }) do
      probes[#probes + 1] = probe
    end
  end
  for _, probe in ipairs(probes) do
    if not redis.acl_check_cmd(unpack(probe)) then
      refused(probe[1], probe[2])
    end
  end
end

-- A count as a field holds it: a whole number from 0 to MAX_COUNT; nil for anything else
-- (a missing field, which HMGET gives as false, included).
local function count_of(value)
  local count = type(value) == 'string' and tonumber(value)
  if count and count >= 0 and count <= MAX_COUNT and count % 1 == 0 then
    return count
  end
  return nil
end

-- A bucket field's duration and start.
local function bucket_of(field)
  local duration, start = string.match(field, '^(%d+):[012]:(%d+)$')
  return tonumber(duration), tonumber(start)
end

-- The fields of a hash whose values are counts, flattened: those of a bucket (`pattern`);
-- and how many fields were neither those nor `v`.
local function counts_of(key, pattern)
  local length = call('HLEN', key)
  if failed(length) then
    return {}, 0
  end
  if length > MAX_FIELDS then
    return {}, length
  end
  local all = call('HGETALL', key)
  if failed(all) then
    return {}, 0
  end
  local out, skipped = {}, 0
  for i = 1, #all, 2 do
    local field, value = all[i], all[i + 1]
    if string.match(field, pattern) and count_of(value) then
      out[#out + 1] = field
      out[#out + 1] = value
    elseif field ~= 'v' then
      skipped = skipped + 1
    end
  end
  return out, skipped
end

-- Each host's count of `field` of `service`, added up: the sum, as it should be.
local function recount(service, field)
  local members = call('SCARD', hosts_key)
  local hosts = {}
  if not failed(members) and members <= MAX_HOSTS then
    hosts = call('SMEMBERS', hosts_key)
    if failed(hosts) then
      hosts = {}
    end
  end
  local seen, total = {}, 0
  hosts[#hosts + 1] = host
  for _, id in ipairs(hosts) do
    if not seen[id] then
      seen[id] = true
      local count = call('HGET', host_prefix .. id, field .. ':' .. service)
      total = total + (count_of(count) or 0)
    end
  end
  return math.min(total, MAX_COUNT)
end

-- `command` on `key` with `args`, in calls of at most 1,000 arguments (Lua's unpack has a
-- limit); the replies of HMGET joined. `args` of a HSET come in pairs, and 1,000 is even.
local function chunked(command, key, args)
  if #args <= 1000 then
    return call(command, key, unpack(args))
  end
  local replies = {}
  for first = 1, #args, 1000 do
    local reply = call(command, key, unpack(args, first, math.min(first + 999, #args)))
    if failed(reply) then
      return reply
    end
    if type(reply) == 'table' then
      for _, value in ipairs(reply) do
        replies[#replies + 1] = value
      end
    end
  end
  return replies
end

local function expire(key, seconds)
  -- NX then GT: a key gets a lifetime, and only ever a longer one from a host, so that one
  -- host's shorter window never cuts another's data short.
  call('EXPIRE', key, seconds, 'NX')
  call('EXPIRE', key, seconds, 'GT')
end

-- The shard's version: 0 when absent; nil when it is not a counter (not ours): every service
-- is then looked at, as if every one had changed.
local shard = call('GET', version_key)
local shard_version = 0
if failed(shard) or (shard and not string.match(shard, '^%d+$')) then
  shard_version = nil
elseif shard then
  shard_version = tonumber(shard)
end
-- The services another host changed since this host's version of the shard; nil: all.
local changed_since, look_at_all = nil, false
local known = tonumber(known_shard)
-- A version behind the one this host holds: the shard's keys were lost (Redis flushed, or
-- restarted under a live connection), and with them what this host published: it says so,
-- and the host publishes everything again at its next sync.
local lost = known ~= nil and shard_version ~= nil and known > shard_version
if shard_version and known and known <= shard_version and shard_version - known < CHANGES_KEPT then
  changed_since = {}
  if known < shard_version then
    local count = call('ZCOUNT', changes_key, '(' .. known, '+inf')
    local names = (not failed(count) and count <= MAX_CHANGED) and call('ZRANGEBYSCORE', changes_key, '(' .. known, '+inf')
    if not names or failed(names) then
      -- The host looks at every service it counts at its next sync.
      changed_since, look_at_all = nil, true
    else
      for _, name in ipairs(names) do
        changed_since[name] = true
      end
    end
  end
end

-- One service: its updates at ARGV[at …]. Returns its answer, and whether a sum changed.
local own_writes, own_deletes, own_written = {}, {}, false
-- This host's counts of every bucket updated in the call, read at once (`own_read`, from
-- `own_at` for a service's first update), or why they could not be (`own_failed`).
local own_read, own_failed, own_at, own_names = {}, nil, 1, {}
local function sync(sums, service, known_version, keep, n, d, at)
  local suffix = ':' .. service
  local fields = { 'v' }
  for u = 0, n - 1 do
    fields[#fields + 1] = ARGV[at + 4 * u]
  end
  local read = chunked('HMGET', sums, fields)
  if failed(read) then
    return { false, sums .. ': ' .. read.err, 0, 0, 0, false }, false
  end
  if own_failed then
    return { false, own .. ': ' .. own_failed, 0, 0, 0, false }, false
  end
  local version = tonumber(read[1]) or 0
  local others_changed = known_version ~= tostring(version)

  local sums_set, recounts, rejected, changed = {}, {}, 0, false
  for u = 0, n - 1 do
    local field, start, expected = ARGV[at + 4 * u], tonumber(ARGV[at + 4 * u + 1]), ARGV[at + 4 * u + 2]
    local new = tonumber(ARGV[at + 4 * u + 3])
    if start > now + bound then
      rejected = rejected + 1
    else
      local stored = own_read[own_at + u]
      local own_count = count_of(stored)
      local old = own_count or 0
      local sum = count_of(read[u + 2])
      -- The sum is this host's count plus the others': a sum lost, or below this host's count,
      -- or a count of this host's that is not what it published, is recounted from every
      -- host's counts.
      local trusted = (stored == false or own_count ~= nil)
        and (expected == '' or expected == (stored or '0'))
        and (sum ~= nil or old == 0)
        and (sum or 0) >= old
      if new ~= old or not trusted then
        own_writes[#own_writes + 1] = own_names[own_at + u]
        own_writes[#own_writes + 1] = new
      end
      if not trusted then
        recounts[#recounts + 1] = field
      elseif new ~= old then
        sums_set[#sums_set + 1] = field
        sums_set[#sums_set + 1] = math.min(math.max((sum or 0) + new - old, 0), MAX_COUNT)
        changed = true
      end
    end
  end
  -- Buckets no window of their duration reads any more, the bound past that.
  local gone = {}
  for g = 0, d - 1 do
    local field = ARGV[at + 4 * n + g]
    local duration, start = bucket_of(field)
    if duration and start + duration * read_for + bound < now then
      gone[#gone + 1] = field
      own_deletes[#own_deletes + 1] = field .. suffix
    end
  end
  if #gone > 0 then
    chunked('HDEL', sums, gone)
  end
  if #recounts > 0 then
    -- This host's counts first: the recount reads them.
    if #own_writes > 0 then
      chunked('HSET', own, own_writes)
      own_writes, own_written = {}, true
    end
    for _, field in ipairs(recounts) do
      sums_set[#sums_set + 1] = field
      sums_set[#sums_set + 1] = recount(service, field)
    end
    changed = true
  end
  if changed then
    version = version + 1
    sums_set[#sums_set + 1] = 'v'
    sums_set[#sums_set + 1] = version
  end
  if #sums_set > 0 then
    chunked('HSET', sums, sums_set)
    if keep == 0 and read[1] == false then
      -- A hash this call made (or one that lost its lifetime) never stays without one.
      keep = longest
    end
  end
  if keep > 0 then
    expire(sums, keep)
  end

  local sums_out, skipped = false, 0
  if others_changed or #recounts > 0 then
    sums_out, skipped = counts_of(sums, BUCKET_FIELD)
  end
  if not sums_out and rejected == 0 and #recounts == 0 then
    -- The common answer, as short as it goes: the version, every update applied.
    return tostring(version), changed
  end
  return { tostring(version), '', rejected, #recounts, skipped, sums_out }, changed
end

-- The longest a service of the call is kept: for the shard's keys, and a hash made without
-- a lifetime.
local longest = 1
do
  local at = 9
  while at <= #ARGV do
    local service, n = ARGV[at], tonumber(ARGV[at + 3])
    longest = math.max(longest, tonumber(ARGV[at + 2]))
    for u = 0, n - 1 do
      own_names[#own_names + 1] = ARGV[at + 5 + 4 * u] .. ':' .. service
    end
    at = at + 5 + 4 * n + tonumber(ARGV[at + 4])
  end
  if #own_names > 0 then
    own_read = chunked('HMGET', own, own_names)
    if failed(own_read) then
      own_failed, own_read = own_read.err, {}
    end
  end
end

local reply, changed_services, renewed, listed = { now, '', false, {} }, {}, false, {}
local at = 9
for i = 5, #KEYS do
  local service, known_version, keep = ARGV[at], ARGV[at + 1], tonumber(ARGV[at + 2])
  listed[service] = true
  local n, d = tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4])
  -- Every service sent has something to do: the sidecar sends the others only when it holds
  -- no version of the shard, and then each is looked at.
  local answer, changed = sync(KEYS[i], service, known_version, keep, n, d, at + 5)
  reply[#reply + 1] = answer
  if changed then
    changed_services[#changed_services + 1] = service
  end
  renewed = renewed or keep > 0
  own_at = own_at + n
  at = at + 5 + 4 * n + d
end
if #own_writes > 0 then
  chunked('HSET', own, own_writes)
  own_written = true
end
if #own_deletes > 0 then
  chunked('HDEL', own, own_deletes)
end
if keep_own > 0 then
  call('EXPIRE', own, keep_own)
elseif own_written then
  call('EXPIRE', own, longest, 'NX')
end
if renewed then
  call('SADD', hosts_key, host)
  expire(hosts_key, longest)
end
if #changed_services > 0 and shard_version then
  shard_version = call('INCR', version_key)
  local scored = {}
  for _, service in ipairs(changed_services) do
    scored[#scored + 1] = shard_version
    scored[#scored + 1] = service
  end
  chunked('ZADD', changes_key, scored)
  call('ZREMRANGEBYSCORE', changes_key, '-inf', shard_version - CHANGES_KEPT)
  expire(version_key, longest)
  expire(changes_key, longest)
end
if lost then
  reply[2] = 'lost'
elseif shard_version and not look_at_all then
  reply[2] = tostring(shard_version)
end
if changed_since then
  local extra = {}
  for service in pairs(changed_since) do
    if not listed[service] then
      local sums = sums_prefix .. service
      local version = call('HGET', sums, 'v')
      local counts, skipped = counts_of(sums, BUCKET_FIELD)
      if not failed(version) then
        extra[#extra + 1] = service
        extra[#extra + 1] = version or '0'
        extra[#extra + 1] = counts
        extra[#extra + 1] = skipped
      end
    end
  end
  reply[4] = extra
end
if first then
  reply[3] = counts_of(own, '^[1-9]%d*:[012]:%d+:')
end
return reply
