//! The Lua scripts of the operations keys: one per operation, each declaring every key it
//! touches (all under the hash tag `{<prefix>:ops}`, so in one cluster slot), each starting
//! with the server's `TIME` like the lock scripts.
//!
//! Rows are stored as JSON objects (Redis's built-in `cjson`) whose values are all strings:
//! times are milliseconds since the epoch as decimal text, so no number goes through Lua's
//! doubles in `cjson` (which prints 14 significant digits). A read returns each row as an
//! array, its absent fields as nil, parsed in `operations.rs`:
//!
//! - a run: `{id, job, slot, fire_kind, instance_id, fence, started_at, ended_at, outcome,
//!   error, attempt, cancel_requested, params}` (a row written before the last three read as
//!   `1`, `0` and no parameters);
//! - a control row: `{id, job, kind, requested_at, requested_by, claimed_by, claimed_at,
//!   slot, params}` (slot for an `after` request, params for a trigger request with them);
//! - a registry row: `{instance_id, job, lock_name, trigger, zone, next_fire,
//!   following_fire, host, pid, version, started_at, clock_offset_ms, heartbeat_ms,
//!   heartbeat_at}` (job `""` for the instance's own row);
//! - an action: `{id, at, job, action, requested_by, detail}`;
//! - an open incident: `{key, summary, opened_at}`.
//!
//! Parameters are stored as [`Params::encode`](lock_core::Params::encode)'s text, in field
//! `params`, only when there are some.
//!
//! An `after` request (a dependent job's, `ControlKind::After`) is a control row like the
//! others, in control:open while it exists (every heartbeat returns it), plus one member
//! `<len>:<child>:<slot as 20 digits>:<id as 20 digits>` in control:after (all scores 0: one
//! lexicographic range per child, and within it per slot) and the same member in
//! control:after:requested scored by its request time, for housekeeping. Claims and
//! withdrawals only act on `trigger` rows, so they never touch it.

use redis::Script;

use crate::scripts::lua;

/// [`lua!`] with the helpers every operations script shares: the row readers and the
/// members of the per-job run index (`<len>:<job>:<id as 20 digits>`, so that one job's runs
/// are one lexicographic range whatever the job's name holds).
macro_rules! ops_lua {
    ($body:expr) => {
        lua!(
            r#"
local function run_row(id, raw)
  local r = cjson.decode(raw)
  return {id, r.job, r.slot or false, r.kind, r.instance, r.fence, r.started,
    r.ended or false, r.outcome, r.error or false, r.attempt or '1', r.cancel or '0',
    r.params or false}
end
local function control_row(id, raw)
  local c = cjson.decode(raw)
  return {id, c.job, c.kind, c.at, c.by, c.claimed_by or false, c.claimed_at or false,
    c.slot or false, c.params or false}
end
local function job_member(job, id)
  return #job .. ':' .. job .. ':' .. string.format('%020.0f', tonumber(id))
end
local function job_range(job)
  local head = #job .. ':' .. job .. ':'
  return '[' .. head .. string.rep('0', 20), '[' .. head .. string.rep('9', 20)
end
local function member_id(member)
  return ms(tonumber(string.sub(member, -20)))
end
local function after_head(child, slot)
  local head = #child .. ':' .. child .. ':'
  if slot then head = head .. string.format('%020.0f', tonumber(slot)) .. ':' end
  return head
end
local function after_gone(control, open, after, requested, member)
  local id = member_id(member)
  redis.call('HDEL', control, id)
  redis.call('ZREM', open, id)
  redis.call('ZREM', after, member)
  redis.call('ZREM', requested, member)
end
"#,
            $body
        )
    };
}

/// Heartbeat. KEYS: instances, heartbeats, control, control:open. ARGV: instance id, host,
/// pid, version, started_at, clock_offset_ms, heartbeat_ms, complete (`1` or `0`), then six
/// per job: name, lock_name, trigger, zone, next_fire, following_fire (`""` for none).
/// Upserts the instance's row and one per job with `heartbeat_at = now`; when complete,
/// deletes the instance's job rows written before (those of jobs it no longer runs: read
/// from the heartbeats index, every row older than this beat, filtered by the field's
/// instance prefix, once a minute per instance); returns every pause and unclaimed trigger
/// request (control rows, oldest first).
pub const HEARTBEAT: &str = ops_lua!(
    r#"
local beat = ms(now)
local function row(job)
  return {instance = ARGV[1], host = ARGV[2], pid = ARGV[3], version = ARGV[4],
    started = ARGV[5], offset = ARGV[6], every = ARGV[7], beat = beat, job = job}
end
local function put(r)
  local field = cjson.encode({r.instance, r.job})
  redis.call('HSET', KEYS[1], field, cjson.encode(r))
  redis.call('ZADD', KEYS[2], beat, field)
end
put(row(''))
if ARGV[8] == '1' then
  -- `["<instance>",` : the start of every field of this instance's rows.
  local own = cjson.encode({ARGV[1], ''})
  local prefix = string.sub(own, 1, #own - 3)
  for _, field in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. beat)) do
    if string.sub(field, 1, #prefix) == prefix then
      redis.call('HDEL', KEYS[1], field)
      redis.call('ZREM', KEYS[2], field)
    end
  end
end
for i = 9, #ARGV - 5, 6 do
  local r = row(ARGV[i])
  r.lock = ARGV[i + 1]
  r.trigger = ARGV[i + 2]
  if ARGV[i + 3] ~= '' then r.zone = ARGV[i + 3] end
  if ARGV[i + 4] ~= '' then r.next = ARGV[i + 4] end
  if ARGV[i + 5] ~= '' then r.following = ARGV[i + 5] end
  put(r)
end
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
  local raw = redis.call('HGET', KEYS[3], id)
  if raw then out[#out + 1] = control_row(id, raw) end
end
return out
"#
);

/// Claim a trigger request. KEYS: control, control:open, control:claimed. ARGV: request id,
/// instance id. 1 when this call claimed it (it was an unclaimed trigger request), else 0 and
/// nothing written: one script, so exactly one claimer wins.
pub const CLAIM_TRIGGER: &str = ops_lua!(
    r#"
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local c = cjson.decode(raw)
if c.kind ~= 'trigger' or c.claimed_by then return 0 end
c.claimed_by = ARGV[2]
c.claimed_at = ms(now)
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(c))
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], c.claimed_at, ARGV[1])
return 1
"#
);

/// Hand a claimed trigger request back. KEYS: control, control:open, control:claimed. ARGV:
/// request id, instance id. 1 when that instance held the claim and the request is pending
/// again (in control:open by its id, as a new request is), else 0 and nothing written.
pub const UNCLAIM_TRIGGER: &str = ops_lua!(
    r#"
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local c = cjson.decode(raw)
if c.kind ~= 'trigger' or c.claimed_by ~= ARGV[2] then return 0 end
c.claimed_by = nil
c.claimed_at = nil
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(c))
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[1], ARGV[1])
return 1
"#
);

/// Start of a run. KEYS: ids, runs, runs:started, runs:by_job, runs:last. ARGV: job, slot
/// (`""` for none), fire kind, instance id, fence, attempt, params (`""` for none). Returns
/// the new run id.
pub const RUN_STARTED: &str = ops_lua!(
    r#"
local id = ms(redis.call('HINCRBY', KEYS[1], 'run', 1))
local run = {job = ARGV[1], kind = ARGV[3], instance = ARGV[4], fence = ARGV[5],
  attempt = ARGV[6], started = ms(now), outcome = 'running'}
if ARGV[2] ~= '' then run.slot = ARGV[2] end
if ARGV[7] ~= '' then run.params = ARGV[7] end
redis.call('HSET', KEYS[2], id, cjson.encode(run))
redis.call('ZADD', KEYS[3], run.started, string.format('%020.0f', tonumber(id)))
redis.call('ZADD', KEYS[4], 0, job_member(ARGV[1], id))
redis.call('HSET', KEYS[5], ARGV[1], id)
return tonumber(id)
"#
);

/// End of a run. KEYS: runs, runs:succeeded, runs:logs. ARGV: run id, outcome, `1` with an
/// error text in `ARGV[4]` or `0` without, `1` when cancellation was asked or `0`, the run's
/// log lines (`""` for none). 1 when the run exists (0: deleted by housekeeping meanwhile).
pub const RUN_ENDED: &str = ops_lua!(
    r#"
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local run = cjson.decode(raw)
run.ended = ms(now)
run.outcome = ARGV[2]
if ARGV[3] == '1' then run.error = ARGV[4] else run.error = nil end
run.cancel = ARGV[5]
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(run))
if ARGV[6] ~= '' then redis.call('HSET', KEYS[3], ARGV[1], ARGV[6])
else redis.call('HDEL', KEYS[3], ARGV[1]) end
if ARGV[2] == 'succeeded' then
  local best = tonumber(redis.call('HGET', KEYS[2], run.job))
  if not best or best < now then redis.call('HSET', KEYS[2], run.job, run.ended) end
end
return 1
"#
);

/// Pause. KEYS: ids, control, control:open, control:paused. ARGV: job, requested by. 1 when
/// paused now, 0 when it was paused already (one pause row per job).
pub const PAUSE: &str = ops_lua!(
    r#"
if redis.call('HEXISTS', KEYS[4], ARGV[1]) == 1 then return 0 end
local id = ms(redis.call('HINCRBY', KEYS[1], 'control', 1))
redis.call('HSET', KEYS[2], id, cjson.encode({job = ARGV[1], kind = 'pause', at = ms(now), by = ARGV[2]}))
redis.call('ZADD', KEYS[3], id, id)
redis.call('HSET', KEYS[4], ARGV[1], id)
return 1
"#
);

/// Resume. KEYS: control, control:open, control:paused. ARGV: job. 1 when a pause was
/// removed, 0 when the job was not paused.
pub const RESUME: &str = ops_lua!(
    r#"
local id = redis.call('HGET', KEYS[3], ARGV[1])
if not id then return 0 end
redis.call('HDEL', KEYS[1], id)
redis.call('ZREM', KEYS[2], id)
redis.call('HDEL', KEYS[3], ARGV[1])
return 1
"#
);

/// Trigger request. KEYS: ids, control, control:open. ARGV: job, requested by, params (`""`
/// for none). Returns the request's id.
pub const REQUEST_TRIGGER: &str = ops_lua!(
    r#"
local id = ms(redis.call('HINCRBY', KEYS[1], 'control', 1))
local c = {job = ARGV[1], kind = 'trigger', at = ms(now), by = ARGV[2]}
if ARGV[3] and ARGV[3] ~= '' then c.params = ARGV[3] end
redis.call('HSET', KEYS[2], id, cjson.encode(c))
redis.call('ZADD', KEYS[3], id, id)
return tonumber(id)
"#
);

/// After request (a dependent job's). KEYS: ids, control, control:open, control:after,
/// control:after:requested. ARGV: child, slot (ms, not negative), parent. Writes the control
/// row (pending, so every heartbeat returns it) and its two index members; returns its id.
pub const REQUEST_AFTER: &str = ops_lua!(
    r#"
local id = ms(redis.call('HINCRBY', KEYS[1], 'control', 1))
local at = ms(now)
redis.call('HSET', KEYS[2], id, cjson.encode({job = ARGV[1], kind = 'after', at = at, by = ARGV[3], slot = ARGV[2]}))
redis.call('ZADD', KEYS[3], id, id)
local member = after_head(ARGV[1], ARGV[2]) .. string.format('%020.0f', tonumber(id))
redis.call('ZADD', KEYS[4], 0, member)
redis.call('ZADD', KEYS[5], at, member)
return tonumber(id)
"#
);

/// The parents of a child's after requests for one slot. KEYS: control, control:after. ARGV:
/// child, slot (ms). Reads the child's range of that slot alone; nothing written.
pub const AFTER_REQUESTS: &str = ops_lua!(
    r#"
local head = after_head(ARGV[1], ARGV[2])
local out = {}
for _, m in ipairs(redis.call('ZRANGEBYLEX', KEYS[2], '[' .. head, '[' .. head .. string.rep('9', 20))) do
  local raw = redis.call('HGET', KEYS[1], member_id(m))
  if raw then out[#out + 1] = cjson.decode(raw).by end
end
return out
"#
);

/// Delete a child's after requests through a slot. KEYS: control, control:open,
/// control:after, control:after:requested. ARGV: child, through (ms, inclusive), limit.
/// Deletes at most `limit` of them, oldest slot first, with their index members; returns how
/// many (the caller calls again while a batch was full).
pub const DELETE_AFTER: &str = ops_lua!(
    r#"
local head = after_head(ARGV[1])
local hi = '[' .. after_head(ARGV[1], ARGV[2]) .. string.rep('9', 20)
local gone = redis.call('ZRANGEBYLEX', KEYS[3], '[' .. head, hi, 'LIMIT', 0, tonumber(ARGV[3]))
for _, m in ipairs(gone) do after_gone(KEYS[1], KEYS[2], KEYS[3], KEYS[4], m) end
return #gone
"#
);

/// Withdraw a trigger request. KEYS: control, control:open. ARGV: request id. 1 when it was
/// an unclaimed trigger request and is gone, else 0 and nothing written.
pub const WITHDRAW_TRIGGER: &str = ops_lua!(
    r#"
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local c = cjson.decode(raw)
if c.kind ~= 'trigger' or c.claimed_by then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
"#
);

/// Every control row. KEYS: control. Nothing written.
pub const READ_CONTROL: &str = ops_lua!(
    r#"
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do out[#out + 1] = control_row(all[i], all[i + 1]) end
return out
"#
);

/// Every registry row. KEYS: instances. Nothing written.
pub const READ_REGISTRY: &str = ops_lua!(
    r#"
local out = {}
for _, raw in ipairs(redis.call('HVALS', KEYS[1])) do
  local r = cjson.decode(raw)
  out[#out + 1] = {r.instance, r.job, r.lock or '', r.trigger or '', r.zone or false,
    r.next or false, r.following or false, r.host, r.pid, r.version, r.started, r.offset,
    r.every, r.beat}
end
return out
"#
);

/// The instances' own rows of the registry, without their jobs' rows. KEYS: instances.
/// Nothing written. An instance's own row has the field `["<instance>",""]`, which no job
/// row's field ends like (a job's name is never empty, and a quote in it is escaped), so the
/// server's `HSCAN .. MATCH` picks them out and only they are decoded: every instance reads
/// these rows at each heartbeat when it shares jobs out or runs sharded ones, and decoding
/// every job row (4 instances x 2,500 jobs: 10,000 rows a beat) held the server up.
pub const READ_INSTANCES: &str = ops_lua!(
    r#"
local out = {}
local cursor = '0'
repeat
  local page = redis.call('HSCAN', KEYS[1], cursor, 'MATCH', '*,""]', 'COUNT', 1000)
  cursor = page[1]
  local fields = page[2]
  for i = 1, #fields, 2 do
    local r = cjson.decode(fields[i + 1])
    if r.job == '' then
      out[#out + 1] = {r.instance, r.job, r.lock or '', r.trigger or '', r.zone or false,
        r.next or false, r.following or false, r.host, r.pid, r.version, r.started, r.offset,
        r.every, r.beat}
    end
  end
until cursor == '0'
return out
"#
);

/// A job's newest runs first. KEYS: runs, runs:by_job. ARGV: job, limit. Nothing written.
pub const READ_HISTORY: &str = ops_lua!(
    r#"
local lo, hi = job_range(ARGV[1])
local out = {}
for _, m in ipairs(redis.call('ZREVRANGEBYLEX', KEYS[2], hi, lo, 'LIMIT', 0, tonumber(ARGV[2]))) do
  local id = member_id(m)
  local raw = redis.call('HGET', KEYS[1], id)
  if raw then out[#out + 1] = run_row(id, raw) end
end
return out
"#
);

/// The log lines of a job's runs in an id range, newest first, for those that kept any.
/// KEYS: runs:by_job, runs:logs. ARGV: job, lowest id, highest id. Returns `{id, text}` pairs.
/// Nothing written.
pub const READ_RUN_LOGS: &str = ops_lua!(
    r#"
local out = {}
local lo, hi = '[' .. job_member(ARGV[1], ARGV[2]), '[' .. job_member(ARGV[1], ARGV[3])
for _, m in ipairs(redis.call('ZREVRANGEBYLEX', KEYS[1], hi, lo)) do
  local id = member_id(m)
  local text = redis.call('HGET', KEYS[2], id)
  if text then out[#out + 1] = {id, text} end
end
return out
"#
);

/// The newest run of every job. KEYS: runs, runs:last. Nothing written.
pub const READ_LAST_RUNS: &str = ops_lua!(
    r#"
local last = redis.call('HGETALL', KEYS[2])
local out = {}
for i = 1, #last, 2 do
  local raw = redis.call('HGET', KEYS[1], last[i + 1])
  if raw then out[#out + 1] = run_row(last[i + 1], raw) end
end
return out
"#
);

/// Housekeeping of the history. KEYS: runs, runs:started, runs:by_job, runs:last,
/// runs:succeeded, runs:logs. ARGV: before (ms, exclusive), limit. Deletes at most `limit`
/// runs started before the cut-off, oldest first, with their index entries and log lines; a job whose newest run or
/// latest success went with them gets the next one from what is left (or none). Returns how
/// many runs were deleted.
pub const DELETE_RUNS: &str = ops_lua!(
    r#"
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local newest, success = {}, {}
for _, started in ipairs(gone) do
  local id = member_id(started)
  local raw = redis.call('HGET', KEYS[1], id)
  redis.call('HDEL', KEYS[1], id)
  redis.call('HDEL', KEYS[6], id)
  redis.call('ZREM', KEYS[2], started)
  if raw then
    local r = cjson.decode(raw)
    redis.call('ZREM', KEYS[3], job_member(r.job, id))
    if redis.call('HGET', KEYS[4], r.job) == id then newest[r.job] = true end
    if r.outcome == 'succeeded' and r.ended and redis.call('HGET', KEYS[5], r.job) == r.ended then
      success[r.job] = true
    end
  end
end
for job in pairs(newest) do
  local lo, hi = job_range(job)
  local m = redis.call('ZREVRANGEBYLEX', KEYS[3], hi, lo, 'LIMIT', 0, 1)[1]
  if m then redis.call('HSET', KEYS[4], job, member_id(m)) else redis.call('HDEL', KEYS[4], job) end
end
for job in pairs(success) do
  local lo, hi = job_range(job)
  local best = nil
  for _, m in ipairs(redis.call('ZRANGEBYLEX', KEYS[3], lo, hi)) do
    local raw = redis.call('HGET', KEYS[1], member_id(m))
    if raw then
      local r = cjson.decode(raw)
      local ended = tonumber(r.ended)
      if r.outcome == 'succeeded' and ended and (not best or ended > best) then best = ended end
    end
  end
  if best then redis.call('HSET', KEYS[5], job, ms(best)) else redis.call('HDEL', KEYS[5], job) end
end
return #gone
"#
);

/// Housekeeping of the control rows. KEYS: control, control:open, control:claimed,
/// control:after, control:after:requested. ARGV: before (ms, exclusive), limit. Deletes at
/// most `limit` rows, oldest first from each index: trigger requests claimed before the
/// cut-off, then after requests requested before it (those a child's lock never decided:
/// its instances were gone, or it was removed), with their index members. Returns how many.
pub const DELETE_CONTROL: &str = ops_lua!(
    r#"
local cut, left = '(' .. ARGV[1], tonumber(ARGV[2])
if left < 1 then return 0 end
local claimed = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', cut, 'LIMIT', 0, left)
for _, id in ipairs(claimed) do
  redis.call('HDEL', KEYS[1], id)
  redis.call('ZREM', KEYS[3], id)
end
left = left - #claimed
if left < 1 then return #claimed end
local after = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', cut, 'LIMIT', 0, left)
for _, m in ipairs(after) do after_gone(KEYS[1], KEYS[2], KEYS[4], KEYS[5], m) end
return #claimed + #after
"#
);

/// Housekeeping of a hash whose fields a sorted set scores by time (stale registry rows:
/// instances and heartbeats; resolved incidents: incidents and incidents:resolved). KEYS: the
/// hash, the sorted set. ARGV: before (ms, exclusive), limit. Deletes at most `limit` fields
/// scored before the cut-off, oldest first; returns how many.
pub const DELETE_SCORED: &str = ops_lua!(
    r#"
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, field in ipairs(gone) do
  redis.call('HDEL', KEYS[1], field)
  redis.call('ZREM', KEYS[2], field)
end
return #gone
"#
);

/// Record an action. KEYS: ids, actions:jobs, the job's action list. ARGV: job, action,
/// requested by, detail (`""` for none), has detail (`1`/`0`), cap. Pushes the row (time:
/// now) at the head of the job's list, trims the list to the newest `cap` rows, and scores
/// the job in actions:jobs by its oldest row left (for housekeeping). Returns the new id.
pub const RECORD_ACTION: &str = lua!(
    r#"
local id = ms(redis.call('HINCRBY', KEYS[1], 'action', 1))
local row = {id = id, at = ms(now), job = ARGV[1], action = ARGV[2], by = ARGV[3]}
if ARGV[5] == '1' then row.detail = ARGV[4] end
redis.call('LPUSH', KEYS[3], cjson.encode(row))
redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[6]) - 1)
local oldest = cjson.decode(redis.call('LINDEX', KEYS[3], -1))
redis.call('ZADD', KEYS[2], oldest.at, ARGV[1])
return tonumber(id)
"#
);

/// A job's action log, newest first. KEYS: the job's action list. ARGV: limit. Nothing
/// written.
pub const READ_ACTIONS: &str = lua!(
    r#"
local out = {}
local limit = tonumber(ARGV[1])
if limit < 1 then return out end
for _, raw in ipairs(redis.call('LRANGE', KEYS[1], 0, limit - 1)) do
  local a = cjson.decode(raw)
  out[#out + 1] = {a.id, a.at, a.job, a.action, a.by, a.detail or false}
end
return out
"#
);

/// Housekeeping of the action log. KEYS: actions:jobs, then the action list of each job
/// named in ARGV. ARGV: before (ms, exclusive), limit, then the jobs (those actions:jobs
/// scores before the cut-off). Pops at most `limit` rows written before the cut-off from the
/// lists' tails (their oldest), and scores each job again by its oldest row left (or drops
/// it when its list is empty). Returns how many rows were deleted.
pub const DELETE_ACTIONS: &str = lua!(
    r#"
local cut, left, gone = tonumber(ARGV[1]), tonumber(ARGV[2]), 0
for i = 3, #ARGV do
  local key = KEYS[i - 1]
  while left > 0 do
    local raw = redis.call('LINDEX', key, -1)
    if not raw or tonumber(cjson.decode(raw).at) >= cut then break end
    redis.call('RPOP', key)
    left, gone = left - 1, gone + 1
  end
  local raw = redis.call('LINDEX', key, -1)
  if raw then redis.call('ZADD', KEYS[1], cjson.decode(raw).at, ARGV[i])
  else redis.call('ZREM', KEYS[1], ARGV[i]) end
end
return gone
"#
);

/// Open an incident. KEYS: incidents, incidents:resolved. ARGV: key, summary (cut by the
/// caller). Writes the incident, open since now, unless it is open (a resolved one is
/// reopened: its summary and time replaced, out of incidents:resolved). 1 when this call
/// opened it, else 0 and nothing written: one script, so exactly one of concurrent openers
/// wins.
pub const OPEN_INCIDENT: &str = lua!(
    r#"
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if raw and not cjson.decode(raw).resolved then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode({summary = ARGV[2], opened = ms(now)}))
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
"#
);

/// Resolve an incident. KEYS: incidents, incidents:resolved. ARGV: key. Marks the open
/// incident resolved now and scores it in incidents:resolved (for housekeeping). 1 when this
/// call resolved it, else 0 (not open, or unknown) and nothing written.
pub const RESOLVE_INCIDENT: &str = lua!(
    r#"
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local i = cjson.decode(raw)
if i.resolved then return 0 end
i.resolved = ms(now)
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(i))
redis.call('ZADD', KEYS[2], i.resolved, ARGV[1])
return 1
"#
);

/// Every open incident, in no order (the caller sorts). KEYS: incidents. The whole hash:
/// incidents are few (one per alerting key, the resolved ones aged out by housekeeping).
/// Nothing written.
pub const READ_INCIDENTS: &str = lua!(
    r#"
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for n = 1, #all, 2 do
  local i = cjson.decode(all[n + 1])
  if not i.resolved then out[#out + 1] = {all[n], i.summary, i.opened} end
end
return out
"#
);

/// Every operations script, built once per provider (each keeps its SHA1).
#[derive(Clone, Debug)]
pub(crate) struct OpsScripts {
    pub(crate) heartbeat: Script,
    pub(crate) claim_trigger: Script,
    pub(crate) unclaim_trigger: Script,
    pub(crate) run_started: Script,
    pub(crate) run_ended: Script,
    pub(crate) pause: Script,
    pub(crate) resume: Script,
    pub(crate) request_trigger: Script,
    pub(crate) request_after: Script,
    pub(crate) after_requests: Script,
    pub(crate) delete_after: Script,
    pub(crate) withdraw_trigger: Script,
    pub(crate) read_control: Script,
    pub(crate) read_registry: Script,
    pub(crate) read_instances: Script,
    pub(crate) read_history: Script,
    pub(crate) read_last_runs: Script,
    pub(crate) read_run_logs: Script,
    pub(crate) delete_runs: Script,
    pub(crate) delete_control: Script,
    pub(crate) delete_scored: Script,
    pub(crate) record_action: Script,
    pub(crate) read_actions: Script,
    pub(crate) delete_actions: Script,
    pub(crate) open_incident: Script,
    pub(crate) resolve_incident: Script,
    pub(crate) read_incidents: Script,
}

/// Every operations script's source, in the order of [`OpsScripts`].
pub(crate) const ALL: [&str; 27] = [
    HEARTBEAT,
    CLAIM_TRIGGER,
    UNCLAIM_TRIGGER,
    RUN_STARTED,
    RUN_ENDED,
    PAUSE,
    RESUME,
    REQUEST_TRIGGER,
    REQUEST_AFTER,
    AFTER_REQUESTS,
    DELETE_AFTER,
    WITHDRAW_TRIGGER,
    READ_CONTROL,
    READ_REGISTRY,
    READ_INSTANCES,
    READ_HISTORY,
    READ_LAST_RUNS,
    READ_RUN_LOGS,
    DELETE_RUNS,
    DELETE_CONTROL,
    DELETE_SCORED,
    RECORD_ACTION,
    READ_ACTIONS,
    DELETE_ACTIONS,
    OPEN_INCIDENT,
    RESOLVE_INCIDENT,
    READ_INCIDENTS,
];

impl OpsScripts {
    pub(crate) fn new() -> Self {
        OpsScripts {
            heartbeat: Script::new(HEARTBEAT),
            claim_trigger: Script::new(CLAIM_TRIGGER),
            unclaim_trigger: Script::new(UNCLAIM_TRIGGER),
            run_started: Script::new(RUN_STARTED),
            run_ended: Script::new(RUN_ENDED),
            pause: Script::new(PAUSE),
            resume: Script::new(RESUME),
            request_trigger: Script::new(REQUEST_TRIGGER),
            request_after: Script::new(REQUEST_AFTER),
            after_requests: Script::new(AFTER_REQUESTS),
            delete_after: Script::new(DELETE_AFTER),
            withdraw_trigger: Script::new(WITHDRAW_TRIGGER),
            read_control: Script::new(READ_CONTROL),
            read_registry: Script::new(READ_REGISTRY),
            read_instances: Script::new(READ_INSTANCES),
            read_history: Script::new(READ_HISTORY),
            read_last_runs: Script::new(READ_LAST_RUNS),
            read_run_logs: Script::new(READ_RUN_LOGS),
            delete_runs: Script::new(DELETE_RUNS),
            delete_control: Script::new(DELETE_CONTROL),
            delete_scored: Script::new(DELETE_SCORED),
            record_action: Script::new(RECORD_ACTION),
            read_actions: Script::new(READ_ACTIONS),
            delete_actions: Script::new(DELETE_ACTIONS),
            open_incident: Script::new(OPEN_INCIDENT),
            resolve_incident: Script::new(RESOLVE_INCIDENT),
            read_incidents: Script::new(READ_INCIDENTS),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operations_script_reads_the_servers_clock_first() {
        for script in ALL {
            assert!(
                script.starts_with("local t = redis.call('TIME')"),
                "{script}"
            );
        }
    }
}
