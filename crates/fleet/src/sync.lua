-- ganesha-shm fleet sync, format 4: one call per shard of a fleet's services, on the shard's one
-- key, a hash, so that whatever Redis loses of a shard (an eviction, a FLUSHALL, a failover to a
-- replica that missed writes) it loses whole, and every host sees that it did.
--
-- What it guarantees (Redis runs a script alone and whole, and keeps the writes of one that stops
-- half way):
-- 1. A call that fails changes nothing: every check is made and every value computed before the
--    first write of a change, one HSET that Redis refuses whole when out of memory ("unwritten");
--    only an HDEL of buckets no window reads any more, right on its own, comes before it. A
--    request of another shape, or a right the ACL user lacks, stops the call before any write.
-- 2. A call whose sequence is not above the host's last applied changes nothing ("stale"): a
--    late, repeated or replayed call never rolls a host back.
-- 3. A host's counts only grow, but for a reset (5): each is set to the larger of what the host
--    sends and what Redis holds, unless the host says it reset that counter (then as sent), and
--    the sums move by the difference in the same write, so that a call repeated changes nothing;
--    sums found not to be counts, below a host's, or lost (in a bucket the call reads), are
--    recounted from every writer's counts.
-- 4. A shard Redis lost or went back on is found, before anything is applied: the hash's birth
--    is made once with it, its version moves with every change of a sum, and a host's record
--    keeps its last sequence applied; a host that holds another birth ("reborn"), or a later
--    version, or a sequence the hash no longer has ("regressed"), publishes all it holds, and
--    after a regression that call gives the hash a new birth, so that every host does.
-- 5. A reset takes every host's counts of before it: the call that writes a service's latest
--    reset takes every host's counts of the service in the buckets that began before it (on
--    Redis's clock, by each host's clock figure; the sums say where it counted, or every bucket
--    where they are lost) out of their counts and the sums; while it is
--    kept, every later call leaves out what its host counted before it, unless that host took it.
-- 6. One host holds a service's half-open trial at a time: a host takes it only when nobody holds
--    it, it holds it already, or the holder's lease ended; no lease is longer than LONGEST_LEASE.
-- 7. What is not a host's is neither applied nor read: a bucket, reset or failure stamped past
--    Redis's time and the bound (counted as rejected); rows and fields that are not counts (left
--    out, and counted as skipped); a key of another type ("foreign": nothing written).
-- 8. It is bounded: a bucket goes with every count in it once no live host's window reads it, a
--    host's record with its newest bucket, the hash once its newest bucket is read no more; the
--    resets and trials are kept while a bucket before them is read, at most MAX_RESETS services;
--    a reply carries at most MAX_REPLY bytes of sums.
--
-- The hash holds, for each bucket (`<duration>:<start>`, the start in unix seconds on Redis's
-- clock, as the host that counted it stamped it: its own clock's bucket, less how far that clock
-- is ahead of Redis's in whole buckets) of the shard:
--   s:<bucket>         the fleet's sums: a packed (MessagePack) flat list of rows `service,
--                      successes, failures, rejections`, one per service with events in it;
--   o:<host>:<bucket>  each host's own counts of the bucket, in the same shape;
--   w:<bucket>         the hosts that wrote the bucket, comma-separated, so that their counts
--                      go with it;
-- and, for the shard:
--   b                  its birth, made once with the hash: a host that finds another (or none)
--                      knows that Redis lost what it published there, and publishes it all again;
--   n                  its version, moved by every call that changes a sum;
--   x                  its buckets: a packed flat list of `duration, start, version`, the
--                      version at which each bucket's sums last changed;
--   r                  how long the live hosts read a bucket of each duration after it started
--                      (their window and a bucket, how far a stamp may be off, two intervals):
--                      a packed flat list of `duration, seconds, until`;
--   h:<host>           the host's last sequence applied, its newest bucket, and its clock's figure:
--                      `<sequence>:<duration>:<start>:<clock>`;
--   z                  the fleet's resets: a packed flat list `service, time`, the time (unix
--                      milliseconds, Redis's clock) of the latest reset of each service some host
--                      made, kept while a bucket that started before it is read: the call that
--                      writes a reset takes every host's counts of the service in the buckets that
--                      began before it (on Redis's clock, by that host's figure) out of its counts
--                      and the sums, and every later call leaves them out of what it is sent (but
--                      for a host that took that reset: it sends what it counted since);
--                      every host takes what it counted of the service before that time;
--   zv                 the version of z, moved by every call that changes it;
--   t                  the fleet's half-open trials: a packed flat list `service, failure,
--                      holder, lease`, the latest failure (unix milliseconds, Redis's clock) some
--                      host whose circuit of the service is open sent, and the host that holds
--                      the trial due an interval after it until `lease` ("" and 0: none), kept
--                      as long as the resets.
--
-- Every check is made and every value computed before the writes (guarantee 1): an HDEL of the
-- buckets no window reads any more (right on its own), then an HSET of every field the call
-- changes (in more than one command only past 1,000 fields, which Redis can refuse no more once
-- the first is in), then the hash's lifetime. A call with nothing to send and nothing changed
-- writes only the readers' figures and the trials, in one command that Redis may refuse.
--
-- KEYS[1]: the shard's hash.
-- ARGV[1]: the request, a packed map, read by name (the sidecar's `protocol::Request`); a list
--   is an array, and each record of one a map:
--   host: this host's id; sequence: above every earlier call of this host (its segment keeps it);
--   born, version: the shard's birth and version this host holds ("": it holds that there is no
--     hash; version -1: none), also with full (a birth it holds, and a version the hash has not
--     reached, make the hash a new birth);
--   full: true when the updates are every bucket this host publishes in the shard, and every sum
--     of its durations is to come back (its first sync, or a shard Redis lost);
--   readers: {duration, seconds} for each bucket duration this host reads: how long after its
--     start it reads a bucket; live: the seconds that figure stands for unless renewed;
--   updates: {bucket, counts} for each bucket whose counts this host changed: the packed rows of
--     every service of the shard it counted in the bucket;
--   resets: {service, mask} for the services whose counters (bit 0 successes, 1 failures, 2
--     rejections) this host reset: their counts in the buckets sent are set as sent, even lower;
--   bound: the clock bound in seconds; check: true to check the ACL rights first (a call after a
--     connection); durations: the other durations this host was told of already; recount: the
--     buckets whose sums this host read and found not to be counts, or below its own: recounted
--     from every writer's counts; applied: the last sequence Redis said it applied of this host
--     in the shard (0: none, or all its buckets gone since), and newest: its newest bucket there
--     (""), so that a host finds out when Redis went back to an older copy of itself, whatever
--     other hosts wrote since; renew: true (with full) to give the hash a new birth, as a host
--     does that found out so; reset_times: {service, time} of the resets this host shares with
--     the fleet (those it made, dated on Redis's clock; with full, every one it knows of), kept
--     in z as the latest of each service; resets_known: the version of z this host holds (-1:
--     none);
--   trials: {service, failure, wants, lease} for each service whose circuit is open on this
--     host: its last failure (Redis's clock, ms), whether it wants the trial (its circuit rejects
--     requests), and for how long it holds the trial when it gets it (ms);
--   clock: how far this host's clock is ahead of Redis's (ms, negative behind), the figure it
--     stamps its buckets on Redis's clock by (each bucket's start less the figure in whole
--     buckets), kept in its record: what tells when each of its buckets began on Redis's clock;
--   taken: {service, time} of the latest reset this host took from its segment (its own, or the
--     fleet's) of each service of the updates that has one: what it counted since is its own.
-- The reply: a packed map (the sidecar's `protocol::Reply`; packed, since Redis would drop the
--   string keys of a table it made a reply of; cmsgpack packs an empty table as an empty array):
--   status: "ok"; "stale" (the host's last sequence is not below this one: another segment runs
--     under its id, or the call came late or twice); "reborn" (the hash
--     is not the one the host holds: the host publishes all it holds, with full); "regressed"
--     (the hash is older than the host read it, or lacks what it applied of the host: the host
--     publishes all it holds, with full and renew);
--     "foreign" (the key is not a hash: not ours); "unwritten: <why>" (Redis refused the write:
--     out of memory, evicting nothing); nothing is written unless "ok";
--   time: Redis's (milliseconds); born, version: the shard's, after the call; sequence: the host's
--     last applied, after the call;
--   sums: by bucket, the sums (packed rows) of each bucket of the host's durations whose sums
--     changed since the version it holds (every one, with full);
--   own: by bucket, this host's counts as Redis holds them where they are not what it sent (and,
--     with full, of the buckets it did not send);
--   figures: {rejected: buckets, resets and failures stamped past Redis's time and the bound, not
--     applied; gone: buckets sent that no window reads any more, not applied; recounted: sums
--     found wrong and recounted from every host's counts; skipped: rows or fields that are not
--     counts, left out};
--   others: {duration, sums} of the newest bucket of each other duration not in `durations`;
--   resets: {version, list} (the version of z, and z) when z is not at the version the host
--     holds (or with full), else {};
--   trials: {service, failure, lease} for each trial sent: the fleet's latest failure, and until
--     when this host holds the trial (Redis's clock, ms; 0: it does not).

local MAX_COUNT = 268435455
-- A hash of ours holds at most this many buckets, a bucket's rows at most this many bytes, its
-- writers at most this many hosts: past them, what Redis holds is not ours (someone wrote it),
-- and reading it costs its shard alone.
local MAX_BUCKETS, MAX_BLOB, MAX_WRITERS = 4000, 1000000, 10000
-- The most a reply carries of sums: past it, the rest is left out and counted as skipped (a
-- fleet's own buckets take far less; only a hash someone else filled reaches it).
local MAX_REPLY = 16000000
-- How long a bucket is read after its start, in buckets, when no live host of its duration said:
-- the longest window and the two buckets beyond it that a ring keeps.
local LONGEST_READ = 122
-- The most services a shard's resets name: past it, the oldest go first.
local MAX_RESETS = 4000
-- The longest lease of a trial a host asks, in milliseconds: three of the longest interval.
local LONGEST_LEASE = 180000

-- Stops the script with an error that names the right the ACL user lacks (Redis's own says only
-- that the script's user may not), which the sidecar logs.
local function refused(command, key)
  error(redis.error_reply('NOPERM fleet mode needs the right +' .. string.lower(command)
    .. ', on the keys of its fleet such as ' .. key))
end

local key = KEYS[1]
local request = cmsgpack.unpack(ARGV[1])
if type(request) ~= 'table' then
  error('ganesha-shm: the request is not a map')
end

-- A field of the request, of the Lua type `kind`: any other stops the call, before it reads or
-- writes anything.
local function request_field(name, kind)
  local value = request[name]
  if type(value) ~= kind then
    error('ganesha-shm: the request\'s ' .. name .. ' is not a ' .. kind)
  end
  return value
end

-- A list of the request, each item of the Lua type `item`, or a map of fields of the types
-- `item` names.
local function request_list(name, item)
  local list = request_field(name, 'table')
  for i = 1, #list do
    local value = list[i]
    if type(item) == 'string' then
      if type(value) ~= item then
        error('ganesha-shm: the request\'s ' .. name .. ' holds an item that is not a ' .. item)
      end
    elseif type(value) ~= 'table' then
      error('ganesha-shm: the request\'s ' .. name .. ' holds an item that is not a map')
    else
      for field_name, kind in pairs(item) do
        if type(value[field_name]) ~= kind then
          error('ganesha-shm: the request\'s ' .. name .. ' holds a ' .. field_name .. ' that is not a ' .. kind)
        end
      end
    end
  end
  return list
end

local host, sequence = request_field('host', 'string'), request_field('sequence', 'number')
local known_born, known_version = request_field('born', 'string'), request_field('version', 'number')
local full = request_field('full', 'boolean')
local readers_sent = request_list('readers', { duration = 'number', seconds = 'number' })
local live = request_field('live', 'number')
local updates = request_list('updates', { bucket = 'string', counts = 'string' })
local resets = request_list('resets', { service = 'string', mask = 'number' })
local bound, check = request_field('bound', 'number'), request_field('check', 'boolean')
local durations_known, recount = request_list('durations', 'number'), request_list('recount', 'string')
local applied, newest_sent = request_field('applied', 'number'), request_field('newest', 'string')
local renew = request_field('renew', 'boolean')
local reset_times = request_list('reset_times', { service = 'string', time = 'number' })
local resets_known = request_field('resets_known', 'number')
local trials = request_list('trials', { service = 'string', failure = 'number', wants = 'boolean', lease = 'number' })
local ahead = request_field('clock', 'number')
local taken_sent = request_list('taken', { service = 'string', time = 'number' })
if ahead % 1 ~= 0 or math.abs(ahead) > 2 ^ 40 then
  error('ganesha-shm: the clock figure is not a whole number of milliseconds')
end

-- Redis's time: its seconds and microseconds.
local function redis_time()
  local time = redis.call('TIME')
  return tonumber(time[1]), tonumber(time[2])
end

local now, micros = redis_time()
-- Milliseconds, for the reply: a host dates its resets on Redis's clock to the millisecond.
local now_ms = now * 1000 + math.floor(micros / 1000)
local figures = { rejected = 0, gone = 0, recounted = 0, skipped = 0 }

-- The fleet's resets the reply carries (see `resets_read`).
local resets_out = {}

-- The fleet's trials the reply carries (see `trials_out`).
local trials_out = {}

-- The reply, packed: Redis would drop the string keys of a table it made a reply of.
local function reply(status, born, version, stored, sums, own, others)
  return cmsgpack.pack({ status = status, time = now_ms, born = born or '', version = version or 0,
    sequence = stored or 0, sums = sums or {}, own = own or {}, figures = figures, others = others or {},
    resets = resets_out, trials = trials_out })
end

-- Every right a call needs, before its first write: Redis keeps the writes of a script stopped
-- half-way, and an ACL checks each command a script runs as it runs it.
if check then
  for _, probe in ipairs({ { 'HMGET', key, 'b' }, { 'HGET', key, 'b' }, { 'HSET', key, 'b', '' },
      { 'HDEL', key, 'b' }, { 'EXPIRE', key, '1' } }) do
    if not redis.acl_check_cmd(unpack(probe)) then
      refused(probe[1], key)
    end
  end
end

-- A packed flat list, or nil when the value is not one (not ours).
local function unpacked(blob, stride)
  if type(blob) ~= 'string' or #blob > MAX_BLOB then
    return nil
  end
  local ok, list = pcall(cmsgpack.unpack, blob)
  if ok and type(list) == 'table' and #list % stride == 0 then
    return list
  end
  return nil
end

-- Whether `count` is one: a whole number from 0 to MAX_COUNT (false for anything else, a
-- string or a table included).
local function is_count(count)
  return type(count) == 'number' and count >= 0 and count <= MAX_COUNT and count % 1 == 0
end

-- Whether `time` is a time or a span in milliseconds: a whole number from 0 to 2^52.
local function is_time(time)
  return type(time) == 'number' and time >= 0 and time < 2 ^ 52 and time % 1 == 0
end

-- A packed list of whole numbers, `stride` to a record (the index, the readers), or nil.
local function numbers_of(blob, stride)
  local list = unpacked(blob, stride)
  if not list or #list > MAX_BUCKETS * stride then
    return nil
  end
  for i = 1, #list do
    local number = list[i]
    if type(number) ~= 'number' or number < 0 or number % 1 ~= 0 then
      return nil
    end
  end
  return list
end

local function bucket_of(field)
  local duration, start = string.match(field, '^([1-9]%d*):(%d+)$')
  return tonumber(duration), tonumber(start)
end

-- By service, the latest reset this host took (those it shares with this call included).
local taken = {}
for _, took in ipairs(taken_sent) do
  if is_time(took.time) then
    taken[took.service] = took.time
  end
end
for _, reset in ipairs(reset_times) do
  if is_time(reset.time) then
    taken[reset.service] = math.max(taken[reset.service] or 0, reset.time)
  end
end

-- When a bucket of `duration` that a host whose clock's figure is `figure` stamped `start`
-- began, on Redis's clock (ms): the host took its figure in whole buckets from its own clock's
-- start (see `fleet::bucket_shift`), so its stamp is off by what that rounding left.
local function began_at(start, duration, figure)
  local span = duration * 1000
  local shift = math.floor((figure + span / 2) / span) * duration
  return (start + shift) * 1000 - figure
end

-- A host's record: its last sequence applied, its newest bucket's duration and start, its clock's
-- figure; nil for what is not one.
local function record_of(value)
  local s, d, t, c = string.match(type(value) == 'string' and value or '', '^(%d+):(%d+):(%d+):(%-?%d+)$')
  if not s then
    return nil
  end
  return tonumber(s), tonumber(d), tonumber(t), tonumber(c)
end

-- Where each service's row starts in a flat list of rows.
local function rows_at(rows)
  local at = {}
  for i = 1, #rows, 4 do
    at[rows[i]] = i
  end
  return at
end

-- The rows packed, without those whose counts are all 0 when `zeros` says there may be some.
local function packed(rows, zeros)
  if not zeros then
    return cmsgpack.pack(rows)
  end
  local kept = {}
  for i = 1, #rows, 4 do
    if rows[i + 1] + rows[i + 2] + rows[i + 3] > 0 then
      local k = #kept
      kept[k + 1], kept[k + 2], kept[k + 3], kept[k + 4] = rows[i], rows[i + 1], rows[i + 2], rows[i + 3]
    end
  end
  return cmsgpack.pack(kept)
end

-- `by_service` (each service's values, a time first) packed as a flat list `service, values…`,
-- the latest first, at most MAX_RESETS services: past it, the oldest go.
local function packed_latest(by_service)
  local list = {}
  for service, values in pairs(by_service) do
    list[#list + 1] = { service, values }
  end
  table.sort(list, function(a, b) return a[2][1] > b[2][1] or (a[2][1] == b[2][1] and a[1] < b[1]) end)
  local flat = {}
  for i = 1, math.min(#list, MAX_RESETS) do
    flat[#flat + 1] = list[i][1]
    for _, value in ipairs(list[i][2]) do
      flat[#flat + 1] = value
    end
  end
  return cmsgpack.pack(flat)
end

local function is_reset(mask, c)
  return mask % 2 ^ c >= 2 ^ (c - 1)
end

-- The host's counts of a bucket: `rows` (what it sent) become the larger of them and `old` (what
-- Redis holds), but for the counters `masks` says it reset; a service it did not send keeps what
-- Redis holds (its slot may have gone; its events have not). Whether that left `rows` as sent,
-- and whether a row may now be all 0. A count of `old` that is not one raises an error.
local function merged_own(rows, old, masks)
  local same, zeros, at = true, false, rows_at(rows)
  for i = 1, #old, 4 do
    local service = old[i]
    local mask = masks[service] or 0
    local j = at[service]
    if not j then
      j = #rows + 1
      rows[j], rows[j + 1], rows[j + 2], rows[j + 3] = service, 0, 0, 0
      same, zeros = false, zeros or mask ~= 0
    end
    for c = 1, 3 do
      local before = old[i + c]
      if not is_count(before) then
        error('not a count')
      end
      if before > rows[j + c] and not is_reset(mask, c) then
        rows[j + c], same = before, false
      end
    end
    if mask ~= 0 then
      zeros = true
    end
  end
  return same, zeros
end

-- The sums moved by what the host's counts moved from `old` to `rows`. False when a sum is not
-- a count, or below the host's count: the sums are then recounted. Whether a sum moved.
local function moved_sums(sums, rows, old)
  local sums_at, old_at = rows_at(sums), rows_at(old)
  local moved = false
  for i = 1, #rows, 4 do
    local service = rows[i]
    local o, k = old_at[service], sums_at[service]
    local bs, bf, br = 0, 0, 0
    if o then
      bs, bf, br = old[o + 1], old[o + 2], old[o + 3]
    end
    local s, f, r = rows[i + 1], rows[i + 2], rows[i + 3]
    if s ~= bs or f ~= bf or r ~= br then
      if not k then
        k = #sums + 1
        sums[k], sums[k + 1], sums[k + 2], sums[k + 3] = service, 0, 0, 0
        sums_at[service] = k
      end
      local ss, sf, sr = sums[k + 1], sums[k + 2], sums[k + 3]
      if not (is_count(ss) and is_count(sf) and is_count(sr)) or ss < bs or sf < bf or sr < br then
        return false
      end
      sums[k + 1] = math.min(ss + s - bs, MAX_COUNT)
      sums[k + 2] = math.min(sf + f - bf, MAX_COUNT)
      sums[k + 3] = math.min(sr + r - br, MAX_COUNT)
      moved = true
    end
  end
  return true, moved
end

-- The sums of a bucket as they should be: every writer's counts (`lists`, packed; this host's,
-- `rows`, as they are now, when it is a writer) added up, rows that are not counts left out.
local function recounted(lists, rows)
  local sums, at = {}, {}
  for i = 0, #lists do
    local counted = rows
    if i > 0 then
      counted = unpacked(lists[i], 4)
      if not counted and lists[i] then
        figures.skipped = figures.skipped + 1
      end
    end
    for r = 1, counted and #counted or 0, 4 do
      local service, s, f, e = counted[r], counted[r + 1], counted[r + 2], counted[r + 3]
      if type(service) == 'string' and is_count(s) and is_count(f) and is_count(e) then
        local k = at[service]
        if not k then
          k = #sums + 1
          sums[k], sums[k + 1], sums[k + 2], sums[k + 3] = service, 0, 0, 0
          at[service] = k
        end
        sums[k + 1] = math.min(sums[k + 1] + s, MAX_COUNT)
        sums[k + 2] = math.min(sums[k + 2] + f, MAX_COUNT)
        sums[k + 3] = math.min(sums[k + 3] + e, MAX_COUNT)
      else
        figures.skipped = figures.skipped + 1
      end
    end
  end
  return sums
end

-- The fields this call writes, by name, as it writes them: what the call reads after it decided
-- a write (a reset's, before an update's of the same bucket) is what it will have written.
local decided = {}

-- HMGET of `fields`, in calls of at most 1,000 (Lua's unpack has a limit): their values in order,
-- as this call leaves them.
local function hmget(fields)
  local values = {}
  for first = 1, #fields, 1000 do
    local chunk = redis.call('HMGET', key, unpack(fields, first, math.min(first + 999, #fields)))
    for i = 1, #chunk do
      local value = decided[fields[first + i - 1]]
      if value == nil then
        value = chunk[i]
      end
      values[#values + 1] = value
    end
  end
  return values
end

-- The hosts of a bucket's writers list, but `except`; nil for a list that is not ours.
local function writers_of(writers, except)
  local hosts = {}
  if type(writers) ~= 'string' or #writers > MAX_WRITERS * 17 then
    return hosts
  end
  for writer in string.gmatch(writers, '[^,]+') do
    if writer ~= except then
      hosts[#hosts + 1] = writer
    end
  end
  return hosts
end

-- The shard as Redis holds it. A key of another type is not ours: the shard is left alone.
local head = redis.pcall('HMGET', key, 'b', 'n', 'x', 'r', 'h:' .. host, 'zv')
if type(head) == 'table' and head.err then
  return reply('foreign')
end
local born, version = head[1], tonumber(head[2])
if born and not (version and version >= 0 and version % 1 == 0) then
  born, version = nil, nil -- a birth without a version: not ours; the hash is made anew
end
-- A host that holds a birth the hash does not have (another, or none: Redis lost the shard)
-- publishes everything it holds before anything else; so does one that finds the hash older
-- than it read it (Redis went back to an older copy of itself: a failover to a replica that
-- missed writes, a restart from an older save).
if not full and (born or '') ~= known_born then
  return reply('reborn', born, version)
end
if not full and born and version < known_version then
  return reply('regressed', born, version)
end
-- Then that host's call, publishing everything, gives the hash a new birth: every other host,
-- whose writes the older copy may lack too, publishes everything again as well.
local regressed = full and born and born == known_born and (renew or version < known_version)
-- The host's record: the last sequence applied, and its newest bucket.
local stored_sequence, host_newest = 0, nil
if born and head[5] then
  local s, d, t = record_of(head[5])
  stored_sequence = s or 0
  host_newest = d and { d, t } or nil
end
if stored_sequence >= sequence then
  return reply('stale', born, version, stored_sequence)
end
local created = not born
if created then
  version = 0
end
local resets_version = (not created and tonumber(head[6])) or 0
if resets_version < 0 or resets_version % 1 ~= 0 then
  resets_version = 0
end

-- The fleet's resets, as the reply carries them when the host does not hold their version: `z`,
-- as Redis holds it (`written`: as this call writes it).
local function resets_read(full_read, written)
  if full_read or resets_version ~= resets_known then
    local blob = written or (not created and redis.call('HGET', key, 'z'))
    if blob and #blob <= MAX_BLOB then
      resets_out = { version = resets_version, list = blob }
    end
  end
end
local readers = (not created and numbers_of(head[4], 3)) or {}

-- How long after its start a bucket of each duration is read by some live host: the readers'
-- figures, renewed with this host's.
local readers_changed, read_for = false, {}
for _, reader in ipairs(readers_sent) do
  local duration, seconds = reader.duration, reader.seconds
  local at
  for j = 1, #readers, 3 do
    if readers[j] == duration then
      at = j
    end
  end
  if not at then
    at = #readers + 1
    readers[at], readers[at + 1], readers[at + 2] = duration, 0, 0
  end
  if readers[at + 2] < now or seconds > readers[at + 1]
      or (seconds == readers[at + 1] and readers[at + 2] - now < live / 2) then
    readers[at + 1], readers[at + 2], readers_changed = seconds, now + live, true
  end
end
do
  local live_readers = {}
  for i = 1, #readers, 3 do
    if readers[i + 2] >= now then
      read_for[readers[i]] = readers[i + 1]
      local k = #live_readers
      live_readers[k + 1], live_readers[k + 2], live_readers[k + 3] = readers[i], readers[i + 1], readers[i + 2]
    end
  end
  readers = live_readers
end
-- Until when a bucket is read: by the readers' figure; when no live host of its duration said,
-- the longest window and the clock bound past it.
local function read_until(duration, start)
  return start + (read_for[duration] or duration * LONGEST_READ + bound)
end

-- Redis holds less of this host than it applied: the record older than its last write, or gone
-- while its newest bucket is still read (a record goes with the host's newest bucket). Another
-- host's writes since may have moved the version past what this host read: its own writes tell.
if not full and applied > stored_sequence then
  local duration, start = bucket_of(newest_sent)
  if head[5] or (duration and read_until(duration, start) >= now) then
    return reply('regressed', born, version, stored_sequence)
  end
end

-- The fleet's half-open trials of the services whose circuit is open on this host: each host
-- sends its own last failure of each; `t` keeps the latest of the fleet, and which host holds the
-- trial due an interval after it, until when. A failure later by more than a second (times are
-- whole seconds of different clocks) starts a new interval, whose trial is nobody's yet. A host
-- that wants the trial (its circuit rejects requests) takes it when nobody holds it or the
-- holder's lease ended, and its lease is renewed at each of its calls while it wants it.
local trials_written
-- By service, until when Redis holds this host's lease of the trial as the call began.
local leases_held = {}
if #trials > 0 and not created then
  -- Kept as long as the resets: while a bucket that started before it may be read.
  local longest = read_until(1, 0)
  for duration in pairs(read_for) do
    longest = math.max(longest, read_until(duration, 0))
  end
  local held = unpacked(redis.call('HGET', key, 't'), 4) or {}
  local state, changed_trials = {}, false
  for i = 1, #held, 4 do
    local service, failure, holder, lease = held[i], held[i + 1], held[i + 2], held[i + 3]
    -- A failure past Redis's time and the bound, or a lease longer than any host asks, is no
    -- host's: it would keep every host from its trial.
    if type(service) == 'string' and is_time(failure) and failure <= (now + bound) * 1000
        and type(holder) == 'string' and is_time(lease) and lease <= now_ms + LONGEST_LEASE
        and math.floor(failure / 1000) + longest >= now then
      state[service] = { failure, holder, lease }
      if holder == host and lease >= now_ms then
        leases_held[service] = lease
      end
    else
      figures.skipped, changed_trials = figures.skipped + 1, true
    end
  end
  for _, trial in ipairs(trials) do
    local service, failure, wants, lease = trial.service, trial.failure, trial.wants, trial.lease
    if not (is_time(failure) and is_time(lease)) then
      error('ganesha-shm: a trial names no service and times')
    end
    if failure > (now + bound) * 1000 then
      figures.rejected, failure = figures.rejected + 1, 0
    end
    lease = math.min(lease, LONGEST_LEASE)
    local entry = state[service] or { 0, '', 0 }
    if failure > entry[1] + 1000 then
      entry, changed_trials = { failure, '', 0 }, true
    end
    if wants and entry[1] > 0 and (entry[2] == '' or entry[2] == host or entry[3] < now_ms) then
      entry, changed_trials = { entry[1], host, now_ms + lease }, true
    end
    if entry[1] > 0 then
      state[service] = entry
      trials_out[#trials_out + 1] = { service = service, failure = entry[1],
        lease = (entry[2] == host and entry[3] >= now_ms) and entry[3] or 0 }
    end
  end
  if changed_trials then
    trials_written = packed_latest(state)
  end
end

-- A steady call, with nothing to send and nothing changed since the version it holds, reads
-- nothing more (the buckets gone are deleted by the next call that writes, or with the hash).
if not full and #updates == 0 and #recount == 0 and #reset_times == 0 and version == known_version then
  resets_read(false)
  -- Only the readers' figures and the trials: refused when Redis is out of memory, and renewed
  -- next time.
  local written
  if readers_changed and trials_written then
    written = redis.pcall('HSET', key, 'r', cmsgpack.pack(readers), 't', trials_written)
  elseif readers_changed then
    redis.pcall('HSET', key, 'r', cmsgpack.pack(readers))
  elseif trials_written then
    written = redis.pcall('HSET', key, 't', trials_written)
  end
  -- A lease Redis refused to keep is nobody's: another host would take it too. The reply grants
  -- only the leases Redis holds.
  if type(written) == 'table' and written.err then
    for _, out in ipairs(trials_out) do
      out.lease = leases_held[out.service] or 0
    end
  end
  return reply('ok', born, version, stored_sequence)
end
local index = (not created and numbers_of(head[3], 3)) or {}

-- A bucket's place in the index, by its duration and start in one number (a start is below
-- 2^32 until 2106, a duration below 2^20, and a Lua number is exact to 2^53).
local function bucket_id(duration, start)
  return duration * 4294967296 + start
end

-- Buckets no window reads any more go: their sums, their writers' counts, and the records of
-- the hosts whose newest bucket they were.
local deletes, position = {}, {}
do
  local kept, old = {}, {}
  for i = 1, #index, 3 do
    local duration, start = index[i], index[i + 1]
    local id = bucket_id(duration, start)
    if read_until(duration, start) < now then
      old[#old + 1] = duration .. ':' .. start
    elseif not position[id] then
      local k = #kept
      kept[k + 1], kept[k + 2], kept[k + 3] = duration, start, index[i + 2]
      position[id] = k + 1
    end
  end
  index = kept
  if #old > 0 then
    local lists = {}
    for i, field in ipairs(old) do
      lists[i] = 'w:' .. field
    end
    lists = hmget(lists)
    local hosts, records = {}, {}
    for i, field in ipairs(old) do
      deletes[#deletes + 1] = 's:' .. field
      deletes[#deletes + 1] = 'w:' .. field
      for _, writer in ipairs(writers_of(lists[i])) do
        deletes[#deletes + 1] = 'o:' .. writer .. ':' .. field
        if not hosts[writer] then
          hosts[writer] = true
          records[#records + 1] = 'h:' .. writer
        end
      end
    end
    if #records > 0 then
      local values = hmget(records)
      for i, record in ipairs(records) do
        local _, d, t = record_of(values[i])
        if not d or read_until(d, t) < now then
          deletes[#deletes + 1] = record
        end
      end
    end
  end
end

local writes, own_out, sent_fields = {}, {}, {}
local next_version, changed, newest = version + 1, false, host_newest

-- Sums Redis lost (their field deleted) in the buckets this call reads: recounted by this call
-- from every writer's counts, as a reset or this host's update would have them (a host keeps
-- what it last read of a bucket whose sums are missing: the other hosts' last writes there would
-- be lost to it until someone writes the bucket again).
local lost = {}
do
  local durations, since, read = {}, (full or created) and -1 or known_version, {}
  for _, reader in ipairs(readers_sent) do
    durations[reader.duration] = true
  end
  for i = 1, #index, 3 do
    if durations[index[i]] and index[i + 2] > since then
      read[#read + 1] = 's:' .. index[i] .. ':' .. index[i + 1]
    end
  end
  for r, value in ipairs(hmget(read)) do
    if not value then
      lost[#lost + 1] = string.sub(read[r], 3)
    end
  end
end

-- The fleet's resets: the latest of each service kept, with the others while a bucket that
-- started before them is read by some live host (or, when none says, by the longest window);
-- `latest`, as this call leaves them, is what its updates are judged by.
local resets_written, latest, newly = nil, {}, {}
if #reset_times > 0 or #updates > 0 then
  -- How long after it a reset is kept: as long as the longest a bucket of any duration is read.
  local longest = read_until(1, 0)
  for duration in pairs(read_for) do
    longest = math.max(longest, read_until(duration, 0))
  end
  for i = 1, #index, 3 do
    longest = math.max(longest, read_until(index[i], 0))
  end
  local function kept(time)
    return math.floor(time / 1000) + longest >= now
  end
  local held = (not created and unpacked(redis.call('HGET', key, 'z'), 2)) or {}
  local changed_resets = false
  for i = 1, #held, 2 do
    local service, time = held[i], held[i + 1]
    if type(service) == 'string' and is_time(time) and kept(time) then
      latest[service] = math.max(latest[service] or 0, time)
    else
      figures.skipped, changed_resets = figures.skipped + 1, true
    end
  end
  for _, reset in ipairs(reset_times) do
    local service, time = reset.service, reset.time
    if time < 0 or time % 1 ~= 0 then
      error('ganesha-shm: a reset names no service and time')
    elseif time > (now + bound) * 1000 then
      figures.rejected = figures.rejected + 1
    elseif kept(time) and time > (latest[service] or -1) then
      latest[service], newly[service], changed_resets = time, time, true
    end
  end
  if changed_resets then
    local by_service = {}
    for service, time in pairs(latest) do
      by_service[service] = { time }
    end
    resets_written, resets_version = packed_latest(by_service), resets_version + 1
    writes[#writes + 1], writes[#writes + 2] = 'z', resets_written
    writes[#writes + 1], writes[#writes + 2] = 'zv', resets_version
  end
end

-- A reset written by this call takes every host's counts of its service out of the buckets that
-- began before it, each host's by its own clock's figure, whoever counted them and whether or not
-- that host's sidecar runs: so that what was counted before a reset never counts again, and what
-- was counted after it always does, whatever the clocks (a bucket a reset fell in goes whole, as
-- every host's own segment takes it). The sums are counted again from every host's counts.
if next(newly) and not created then
  local last = 0
  for _, time in pairs(newly) do
    last = math.max(last, time)
  end
  local fields, at = {}, {}
  for i = 1, #index, 3 do
    -- A stamp is off from when its bucket began by half a bucket at the most.
    if index[i + 1] * 1000 - index[i] * 500 < last then
      fields[#fields + 1], at[#fields + 1] = 's:' .. index[i] .. ':' .. index[i + 1], i
    end
  end
  local sums_of, hit = hmget(fields), {}
  for f, blob in ipairs(sums_of) do
    local rows = unpacked(blob, 4)
    -- Sums lost, or not counts, tell nothing of who counted the service: the writers' counts do.
    if not rows then
      hit[#hit + 1] = at[f]
    end
    for r = 1, rows and #rows or 0, 4 do
      if newly[rows[r]] then
        hit[#hit + 1] = at[f]
        break
      end
    end
  end
  local lists = {}
  for h, i in ipairs(hit) do
    lists[h] = 'w:' .. index[i] .. ':' .. index[i + 1]
  end
  lists = hmget(lists)
  local clocks, records = {}, {}
  for h = 1, #hit do
    for _, writer in ipairs(writers_of(lists[h])) do
      if clocks[writer] == nil then
        clocks[writer] = false
        records[#records + 1] = writer
      end
    end
  end
  local record_fields = {}
  for r, writer in ipairs(records) do
    record_fields[r] = 'h:' .. writer
  end
  for r, value in ipairs(hmget(record_fields)) do
    local _, _, _, figure = record_of(value)
    clocks[records[r]] = (records[r] == host and ahead) or figure or 0
  end
  for h, i in ipairs(hit) do
    local duration, start = index[i], index[i + 1]
    local field = duration .. ':' .. start
    local writers = writers_of(lists[h])
    local own_fields = {}
    for w, writer in ipairs(writers) do
      own_fields[w] = 'o:' .. writer .. ':' .. field
    end
    local counted = hmget(own_fields)
    for w, writer in ipairs(writers) do
      local rows = unpacked(counted[w], 4)
      local cut = false
      for r = 1, rows and #rows or 0, 4 do
        local time = newly[rows[r]]
        if time and began_at(start, duration, clocks[writer]) < time then
          rows[r + 1], rows[r + 2], rows[r + 3], cut = 0, 0, 0, true
        end
      end
      if cut then
        local blob = packed(rows, true)
        counted[w], decided[own_fields[w]] = blob, blob
        writes[#writes + 1], writes[#writes + 2] = own_fields[w], blob
      end
    end
    local sums = packed(recounted(counted, {}), true)
    decided['s:' .. field] = sums
    writes[#writes + 1], writes[#writes + 2] = 's:' .. field, sums
    index[i + 2], changed = next_version, true
  end
end

-- This host's updates: each bucket's counts set, its sums moved by the difference.
do
  local sent, fields = {}, {}
  for _, update in ipairs(updates) do
    local field = update.bucket
    local duration, start = bucket_of(field)
    if not duration then
      error('ganesha-shm: an update names no bucket: ' .. tostring(field))
    elseif start > now + bound then
      figures.rejected = figures.rejected + 1
    elseif read_until(duration, start) < now then
      figures.gone = figures.gone + 1
    else
      sent[#sent + 1] = { field, update.counts, duration, start }
      sent_fields[field] = true
      local f = #fields
      fields[f + 1], fields[f + 2], fields[f + 3] = 'o:' .. host .. ':' .. field, 's:' .. field, 'w:' .. field
    end
  end
  local masks, wanted = {}, {}
  for _, reset in ipairs(resets) do
    masks[reset.service] = reset.mask
  end
  for _, field in ipairs(recount) do
    wanted[field] = true
  end
  local stored = created and {} or hmget(fields)
  for u, update in ipairs(sent) do
    local field, blob, duration, start = update[1], update[2], update[3], update[4]
    local rows = unpacked(blob, 4)
    if not rows then
      error('ganesha-shm: the update of bucket ' .. field .. ' is not a list of rows')
    end
    -- What this host counted of a service in a bucket that began before the service's latest
    -- reset (by this host's clock's figure) is left out, as if reset, unless this host took that
    -- reset from its segment (it then sends what it counted since).
    local bucket_masks, filtered = masks, false
    for r = 1, #rows, 4 do
      local time = latest[rows[r]]
      if time and (taken[rows[r]] or -1) < time and began_at(start, duration, ahead) < time then
        if not filtered then
          bucket_masks = {}
          for service, mask in pairs(masks) do
            bucket_masks[service] = mask
          end
        end
        bucket_masks[rows[r]], filtered = 7, true
        rows[r + 1], rows[r + 2], rows[r + 3] = 0, 0, 0
      end
    end
    if filtered then
      blob = packed(rows, true)
      rows = unpacked(blob, 4)
    end
    local old_blob, sums_blob, writers = stored[3 * u - 2] or false, stored[3 * u - 1] or false, stored[3 * u] or false
    local old, sums = unpacked(old_blob, 4), unpacked(sums_blob, 4)
    -- Fast: the counts as Redis holds them are counts, and the sums at least this host's.
    local same, zeros, moved = true, false, false
    local fine = (old or not old_blob) and (sums or not sums_blob) and not wanted[field]
    if fine and old then
      fine, same, zeros = pcall(merged_own, rows, old, bucket_masks)
    end
    local first = not sums_blob and not old_blob and (not writers or writers == host)
    if fine and first then
      sums, moved = rows, true
    elseif fine and sums then
      fine, moved = moved_sums(sums, rows, old or {})
      if not fine then
        moved = false
      end
    else
      fine = false
    end
    if not fine then
      -- Counts that are not counts, or sums lost or below this host's count: every writer's
      -- counts added up.
      figures.recounted = figures.recounted + 1
      rows, same = unpacked(blob, 4), true
      if old then
        local ok, merged = pcall(merged_own, rows, old, bucket_masks)
        if ok then
          same = merged
        else
          rows = unpacked(blob, 4)
        end
      end
      local others = {}
      for _, writer in ipairs(writers_of(writers, host)) do
        others[#others + 1] = 'o:' .. writer .. ':' .. field
      end
      sums = recounted(hmget(others), rows)
      moved, zeros = true, true
    end
    -- The host is told what was left out, as what Redis holds of it.
    same = same and not filtered
    local own_blob = same and blob or packed(rows, zeros)
    if moved or not same or not old_blob then
      writes[#writes + 1], writes[#writes + 2] = 'o:' .. host .. ':' .. field, own_blob
    end
    if not same then
      own_out[field] = own_blob
    end
    if moved then
      writes[#writes + 1], writes[#writes + 2] = 's:' .. field, sums == rows and own_blob or packed(sums, zeros)
      changed = true
      local id = bucket_id(duration, start)
      if position[id] then
        index[position[id] + 2] = next_version
      else
        local k = #index
        index[k + 1], index[k + 2], index[k + 3] = duration, start, next_version
        position[id] = k + 1
      end
    end
    if not (writers and string.find(',' .. writers .. ',', ',' .. host .. ',', 1, true)) then
      local listed = (writers and writers ~= '') and (writers .. ',' .. host) or host
      writes[#writes + 1], writes[#writes + 2] = 'w:' .. field, listed
    end
    if not newest or read_until(duration, start) > read_until(newest[1], newest[2]) then
      newest = { duration, start }
    end
  end
end

-- The buckets a host asked to be recounted (at most 64 a call: the rest at the next), and those
-- whose sums were lost, of those this call did not write: from every writer's counts.
local recounting = {}
for r = 1, math.min(#recount, 64) do
  recounting[r] = recount[r]
end
for _, field in ipairs(lost) do
  recounting[#recounting + 1] = field
end
for _, field in ipairs(recounting) do
  local duration, start = bucket_of(field)
  local id = duration and bucket_id(duration, start)
  if id and position[id] and not sent_fields[field] and not decided['s:' .. field] then
    local writers = redis.call('HGET', key, 'w:' .. field)
    local others = {}
    for _, writer in ipairs(writers_of(writers)) do
      others[#others + 1] = 'o:' .. writer .. ':' .. field
    end
    figures.recounted = figures.recounted + 1
    local sums = recounted(hmget(others), {})
    writes[#writes + 1], writes[#writes + 2] = 's:' .. field, packed(sums, true)
    index[position[id] + 2], changed = next_version, true
  end
end

-- A hash made with nothing in it would only expire: nothing is written until there is a count.
if created and #writes == 0 then
  return reply('ok', '', -1, 0, {}, {}, {})
end
if #writes > 0 or regressed then
  if created or regressed then
    local seconds, micros_now = redis_time()
    born = seconds .. '.' .. micros_now .. '.' .. host
    writes[#writes + 1], writes[#writes + 2] = 'b', born
  end
  if changed or created then
    version = changed and next_version or version
    writes[#writes + 1], writes[#writes + 2] = 'n', version
  end
  if newest then
    writes[#writes + 1], writes[#writes + 2] = 'h:' .. host,
      sequence .. ':' .. newest[1] .. ':' .. newest[2] .. ':' .. ahead
    stored_sequence = sequence
  end
end
if #writes > 0 or #deletes > 0 then
  writes[#writes + 1], writes[#writes + 2] = 'x', cmsgpack.pack(index)
end
if readers_changed then
  writes[#writes + 1], writes[#writes + 2] = 'r', cmsgpack.pack(readers)
end
if trials_written then
  writes[#writes + 1], writes[#writes + 2] = 't', trials_written
end

-- The writes: the buckets gone first, then every change in one command.
for first = 1, #deletes, 1000 do
  redis.call('HDEL', key, unpack(deletes, first, math.min(first + 999, #deletes)))
end
if #writes > 0 then
  -- In commands of at most 1,000 fields (Lua's unpack has a limit); Redis refuses a script's
  -- first write alone when it is out of memory, evicting nothing: then nothing is changed, and
  -- the host tries again at its next sync.
  local written = redis.pcall('HSET', key, unpack(writes, 1, math.min(2000, #writes)))
  if type(written) == 'table' and written.err then
    return reply('unwritten: ' .. written.err)
  end
  for first = 2001, #writes, 2000 do
    redis.call('HSET', key, unpack(writes, first, math.min(first + 1999, #writes)))
  end
  -- The hash lives as long as its newest bucket is read: a lifetime when it has none, only ever
  -- a longer one after.
  local until_s = now + live
  for i = 1, #index, 3 do
    until_s = math.max(until_s, read_until(index[i], index[i + 1]))
  end
  redis.call('EXPIRE', key, until_s - now, 'NX')
  redis.call('EXPIRE', key, until_s - now, 'GT')
end

-- What the host reads: the sums of its durations changed since the version it holds; with full,
-- this host's counts it did not send; the newest sums of durations it was not told of.
local mine, told = {}, {}
for _, reader in ipairs(readers_sent) do
  mine[reader.duration] = true
end
for _, duration in ipairs(durations_known) do
  told[duration] = true
end
local since = (full or created or born ~= known_born) and -1 or known_version
local reading, unsent, newest_other = {}, {}, {}
for i = 1, #index, 3 do
  local duration = index[i]
  -- A bucket stamped past Redis's time and the bound is not one a host wrote: never read.
  if index[i + 1] > now + bound then
    figures.skipped = figures.skipped + 1
  elseif mine[duration] then
    if index[i + 2] > since then
      reading[#reading + 1] = duration .. ':' .. index[i + 1]
    end
    if full and not sent_fields[duration .. ':' .. index[i + 1]] then
      unsent[#unsent + 1] = duration .. ':' .. index[i + 1]
    end
  elseif not told[duration] and (not newest_other[duration] or index[i + 1] > newest_other[duration]) then
    newest_other[duration] = index[i + 1]
  end
end
local replied = 0
local function read(prefix, fields, out)
  for first = 1, #fields, 1000 do
    local names = {}
    for i = first, math.min(first + 999, #fields) do
      names[#names + 1] = prefix .. fields[i]
    end
    local values = redis.call('HMGET', key, unpack(names))
    for i, value in ipairs(values) do
      if value and #value <= MAX_BLOB and replied + #value <= MAX_REPLY then
        out[fields[first + i - 1]] = value
        replied = replied + #value
      elseif value then
        figures.skipped = figures.skipped + 1
      end
    end
  end
end
local sums, others = {}, {}
read('s:', reading, sums)
read('o:' .. host .. ':', unsent, own_out)
resets_read(full or created or born ~= known_born, resets_written)
for duration, start in pairs(newest_other) do
  local value = redis.call('HGET', key, 's:' .. duration .. ':' .. start)
  if value then
    others[#others + 1] = { duration = duration, sums = value }
  end
end
return reply('ok', born, version, stored_sequence, sums, own_out, others)
