//! The Lua scripts: one per operation, each on one key, each taking "now" from the server's
//! `TIME` (so every time is the Redis server's, never a client's), and the parsing of their
//! replies.
//!
//! Times are stored as whole milliseconds since the Unix epoch (decimal strings in the hash),
//! the precision of [`FireSlot`](lock_core::FireSlot) and of the SQL providers' columns; `TIME`'s
//! microseconds are truncated to the millisecond. Numbers are written with `%.0f`: Lua 5.1's
//! numbers are doubles, exact for integers far beyond the largest time written (now plus the
//! 1000-year duration cap, about 3.4e13 ms), and `%.0f` never switches to exponent notation.
//!
//! A script that calls `TIME` and then writes is replicated by its effects (the `HSET`s with
//! their values), never re-run on a replica with another clock: Redis 5.0 and later replicate
//! scripts that way by default, and Redis 7 only so. The scripts are sent by SHA
//! (`EVALSHA`); after a `NOSCRIPT` (a restarted or failed-over server, `SCRIPT FLUSH`) the
//! driver loads the script and sends it again, which is safe because `NOSCRIPT` means it did
//! not run.

use chrono::{DateTime, Utc};
use lock_core::LockRecord;
use redis::{Script, Value};

/// The script's clock, first in every script: milliseconds since the epoch, by the server.
macro_rules! lua {
    ($($body:expr),+ $(,)?) => {
        concat!(
            "local t = redis.call('TIME')\n",
            "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n",
            "local function ms(x) return string.format('%.0f', x) end\n",
            $($body),+
        )
    };
}

pub(crate) use lua;

/// The acquire of one key, as a Lua function `acquire(key, locked_by, lease ms, slot ms (`""`
/// for none), max slot lead ms, give up at ms (`""` for none), index, name)`, shared by
/// [`ACQUIRE`] and [`ACQUIRE_MANY`]. A grant adds `name` to the prefix's lock index (a set,
/// `index`; nil where the index lives in another cluster slot), so that `list_locks` reads
/// this prefix's locks without a `SCAN` (adding a member it holds writes nothing). It returns `{status, now, fence}` on a grant (status 0), else `{status,
/// now, locked_by, lock_until, last_fire}` with status 1 held, 2 slot already run, 3 slot in
/// the future, 4 too late (the script's `TIME`, read when the script runs, is past the
/// sender's give-up instant). Every refusal returns before the first write: a losing acquire
/// writes nothing (nothing is replicated, nothing reaches the AOF).
macro_rules! acquire_fn {
    () => {
        r#"
local function acquire(key, locked_by, lease, slot_arg, lead, give_up_at, index, name)
  local slot = tonumber(slot_arg)
  if slot and slot > now + tonumber(lead) then
    return {3, now}
  end
  local deadline = tonumber(give_up_at)
  if deadline and now > deadline then
    return {4, now}
  end
  local row = redis.call('HMGET', key, 'lock_until', 'locked_by', 'last_fire')
  local lock_until = tonumber(row[1])
  if lock_until and lock_until > now then
    return {1, now, row[2], row[1], row[3]}
  end
  local last_fire = tonumber(row[3])
  if slot and last_fire and last_fire >= slot then
    return {2, now, row[2], row[1], row[3]}
  end
  local fence = redis.call('HINCRBY', key, 'fence', 1)
  if slot then
    redis.call('HSET', key, 'lock_until', ms(now + tonumber(lease)), 'locked_at', ms(now),
      'locked_by', locked_by, 'last_fire', slot_arg)
  else
    redis.call('HSET', key, 'lock_until', ms(now + tonumber(lease)), 'locked_at', ms(now),
      'locked_by', locked_by)
  end
  if index then
    redis.call('SADD', index, name)
  end
  return {0, now, fence}
end
"#
    };
}

/// Acquire. `KEYS[1]` the lock, `KEYS[2]` the prefix's lock index (absent where it lives in
/// another cluster slot); ARGV: locked_by, lease ms, slot ms (`""` for none), max slot lead
/// ms, give up at ms (`""` for none), the lock's name. The reply is `acquire_fn!`'s.
pub const ACQUIRE: &str = lua!(
    acquire_fn!(),
    "return acquire(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], KEYS[2], ARGV[6])\n"
);

/// Many acquires in one script, decided one after another on one clock reading, exactly as
/// that many [`ACQUIRE`]s would be (a name twice is granted at most once). `KEYS[i]` the locks,
/// then the prefix's lock index (absent where it lives in another cluster slot); ARGV six per
/// lock as for [`ACQUIRE`]. The reply is the array of their replies, in order.
pub const ACQUIRE_MANY: &str = lua!(
    acquire_fn!(),
    r#"
local out = {}
local n = #ARGV / 6
local index = KEYS[n + 1]
for i = 1, n do
  local j = (i - 1) * 6
  out[i] = acquire(KEYS[i], ARGV[j + 1], ARGV[j + 2], ARGV[j + 3], ARGV[j + 4], ARGV[j + 5],
    index, ARGV[j + 6])
end
return out
"#
);

/// Extend. ARGV: locked_by, fence, lease ms. 1 when the lease was ours and unexpired and now
/// ends `now + lease`; 0 otherwise (nothing written).
pub const EXTEND: &str = lua!(
    r#"
local row = redis.call('HMGET', KEYS[1], 'lock_until', 'locked_by', 'fence')
local lock_until = tonumber(row[1])
if row[2] ~= ARGV[1] or row[3] ~= ARGV[2] or not lock_until or lock_until <= now then
  return 0
end
redis.call('HSET', KEYS[1], 'lock_until', ms(now + tonumber(ARGV[3])))
return 1
"#
);

/// The release of one key, as a Lua function `release(key, locked_by, fence,
/// lock_at_least_for ms)`, shared by [`RELEASE`] and [`RELEASE_MANY`]: ShedLock's
/// `lock_until = max(now, locked_at + lock_at_least_for)` when owner and fence match, 1;
/// otherwise 0 and nothing written.
macro_rules! release_fn {
    () => {
        r#"
local function release(key, locked_by, fence, at_least)
  local row = redis.call('HMGET', key, 'locked_at', 'locked_by', 'fence')
  if row[2] ~= locked_by or row[3] ~= fence then
    return 0
  end
  local until_ = math.max(now, (tonumber(row[1]) or now) + tonumber(at_least))
  redis.call('HSET', key, 'lock_until', ms(until_))
  return 1
end
"#
    };
}

/// Release. ARGV: locked_by, fence, lock_at_least_for ms; the reply is `release_fn!`'s.
pub const RELEASE: &str = lua!(
    release_fn!(),
    "return release(KEYS[1], ARGV[1], ARGV[2], ARGV[3])\n"
);

/// Many releases in one script: `KEYS[i]` the locks, ARGV three per key as for [`RELEASE`];
/// the reply is the array of their replies, in order.
pub const RELEASE_MANY: &str = lua!(
    release_fn!(),
    r#"
local out = {}
for i = 1, #KEYS do
  local j = (i - 1) * 3
  out[i] = release(KEYS[i], ARGV[j + 1], ARGV[j + 2], ARGV[j + 3])
end
return out
"#
);

/// The row and the server's now, `{now, lock_until, locked_at, locked_by, fence, last_fire}`,
/// or `{now}` when there is no such lock. Shared by read, force-unlock and reset-slot. With
/// `KEYS[2]`, the prefix's lock index, and `ARGV[1]`, the lock's name: `{now}` too when the
/// lock is not in the index (a key under the prefix that is another, nested prefix's lock).
macro_rules! read_row {
    ($then:literal) => {
        lua!(
            r#"
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {now}
end
if KEYS[2] and redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0 then
  return {now}
end
local row = redis.call('HMGET', KEYS[1], 'lock_until', 'locked_at', 'locked_by', 'fence', 'last_fire')
"#,
            $then,
            r#"
return {now, row[1], row[2], row[3], row[4], row[5]}
"#
        )
    };
}

/// Read one lock (see `read_row!`): nothing written.
pub const READ: &str = read_row!("");

/// Force-unlock: `lock_until = min(lock_until, now)`, whatever the owner; fence and last_fire
/// kept. Returns the row as it was.
pub const FORCE_UNLOCK: &str = read_row!(
    r#"
local lock_until = tonumber(row[1])
if not lock_until or lock_until > now then
  redis.call('HSET', KEYS[1], 'lock_until', ms(now))
end
"#
);

/// Reset-slot: `last_fire = min(last_fire, now)`: a future one (poisoned) comes back to now, a
/// past one stays, so no slot that ran can run again. Returns the row as it was.
pub const RESET_SLOT: &str = read_row!(
    r#"
local last_fire = tonumber(row[5])
if last_fire and last_fire > now then
  redis.call('HSET', KEYS[1], 'last_fire', ms(now))
end
"#
);

/// The rows of many locks (`KEYS[i]`): `{now, row_1, .., row_n}`, each row `{lock_until,
/// locked_at, locked_by, fence, last_fire}`, or `{}` for a lock that no longer exists. Nothing
/// written. What `list_locks` reads the prefix's lock index with, 256 keys a call.
pub const READ_MANY: &str = lua!(
    r#"
local out = {now}
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    out[i + 1] = redis.call('HMGET', KEYS[i], 'lock_until', 'locked_at', 'locked_by', 'fence',
      'last_fire')
  else
    out[i + 1] = {}
  end
end
return out
"#
);

/// Every script, built once per provider (each keeps its SHA1).
#[derive(Clone, Debug)]
pub(crate) struct Scripts {
    pub(crate) acquire: Script,
    pub(crate) acquire_many: Script,
    pub(crate) extend: Script,
    pub(crate) release: Script,
    pub(crate) release_many: Script,
    pub(crate) read: Script,
    pub(crate) force_unlock: Script,
    pub(crate) reset_slot: Script,
    pub(crate) read_many: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            acquire: Script::new(ACQUIRE),
            acquire_many: Script::new(ACQUIRE_MANY),
            extend: Script::new(EXTEND),
            release: Script::new(RELEASE),
            release_many: Script::new(RELEASE_MANY),
            read: Script::new(READ),
            force_unlock: Script::new(FORCE_UNLOCK),
            reset_slot: Script::new(RESET_SLOT),
            read_many: Script::new(READ_MANY),
        }
    }

    /// Every script, for loading them all at connect.
    pub(crate) fn all(&self) -> [&Script; 9] {
        [
            &self.acquire,
            &self.acquire_many,
            &self.extend,
            &self.release,
            &self.release_many,
            &self.read,
            &self.force_unlock,
            &self.reset_slot,
            &self.read_many,
        ]
    }
}

/// A reply that is not what the script returns: the key was written by something else.
pub(crate) type ReplyError = String;

/// An integer from an integer or decimal-string reply element; `None` for nil.
pub(crate) fn int(value: &Value) -> Result<Option<i64>, ReplyError> {
    match value {
        Value::Nil => Ok(None),
        Value::Int(i) => Ok(Some(*i)),
        Value::BulkString(bytes) => std::str::from_utf8(bytes)
            .ok()
            .and_then(|s| s.parse().ok())
            .map(Some)
            .ok_or_else(|| format!("{:?} is not an integer", String::from_utf8_lossy(bytes))),
        other => Err(format!("{other:?} is not an integer")),
    }
}

/// A string reply element; `None` for nil.
pub(crate) fn text(value: &Value) -> Result<Option<String>, ReplyError> {
    match value {
        Value::Nil => Ok(None),
        Value::BulkString(bytes) => Ok(Some(String::from_utf8_lossy(bytes).into_owned())),
        Value::SimpleString(s) => Ok(Some(s.clone())),
        other => Err(format!("{other:?} is not a string")),
    }
}

/// Milliseconds since the epoch as a UTC time.
pub(crate) fn time(ms: i64) -> Result<DateTime<Utc>, ReplyError> {
    DateTime::from_timestamp_millis(ms).ok_or_else(|| format!("{ms} ms is not a valid time"))
}

/// An optional time element.
pub(crate) fn opt_time(value: &Value) -> Result<Option<DateTime<Utc>>, ReplyError> {
    int(value)?.map(time).transpose()
}

/// The reply of `READ`, `FORCE_UNLOCK` or `RESET_SLOT`: the server's now and the row, if the
/// lock exists. Fields missing from a hash written by hand read as the epoch, `""` and 0.
pub(crate) fn parse_row(
    name: &str,
    reply: &[Value],
) -> Result<(DateTime<Utc>, Option<LockRecord>), ReplyError> {
    let now = time(int(reply.first().unwrap_or(&Value::Nil))?.ok_or("no time in the reply")?)?;
    let [_, lock_until, locked_at, locked_by, fence, last_fire] = reply else {
        return Ok((now, None));
    };
    let lock_until = opt_time(lock_until)?.unwrap_or(DateTime::UNIX_EPOCH);
    let record = LockRecord {
        name: name.to_owned(),
        lock_until,
        locked_at: opt_time(locked_at)?.unwrap_or(DateTime::UNIX_EPOCH),
        locked_by: text(locked_by)?.unwrap_or_default(),
        fence: int(fence)?.map_or(0, lock_core::encoding::fence_from_sql),
        last_fire: opt_time(last_fire)?,
        held: lock_until > now,
    };
    Ok((now, Some(record)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_reads_the_servers_clock_first() {
        for script in [
            ACQUIRE,
            ACQUIRE_MANY,
            EXTEND,
            RELEASE,
            RELEASE_MANY,
            READ,
            FORCE_UNLOCK,
            RESET_SLOT,
            READ_MANY,
        ] {
            assert!(
                script.starts_with("local t = redis.call('TIME')"),
                "{script}"
            );
        }
    }

    #[test]
    fn a_missing_row_and_a_full_row_parse() {
        let now = Value::Int(1_700_000_000_000);
        assert_eq!(parse_row("a", std::slice::from_ref(&now)).unwrap().1, None);
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let reply = [
            now,
            bulk("1700000001000"),
            bulk("1700000000000"),
            bulk("me"),
            bulk("7"),
            Value::Nil,
        ];
        let (_, record) = parse_row("a", &reply).unwrap();
        let record = record.unwrap();
        assert!(record.held);
        assert_eq!((record.fence, record.locked_by.as_str()), (7, "me"));
        assert_eq!(record.last_fire, None);
        assert!(
            parse_row(
                "a",
                &[
                    Value::Int(1),
                    bulk("x"),
                    bulk("1"),
                    bulk("me"),
                    bulk("1"),
                    Value::Nil
                ]
            )
            .is_err()
        );
    }
}
