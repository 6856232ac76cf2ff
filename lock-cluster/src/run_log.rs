//! A run's log lines as the history keeps them: [`RunLog`], one text in a stable format,
//! written with the run's end row and read back by the operators' tools.
//!
//! Decisions, and why:
//! - **One text, not a row per line.** The lines are written with the end row (one statement,
//!   no extra round trip), aged with it (retention deletes the row, the lines go with it) and
//!   read only when asked (`lockctl history --logs`, the dashboard's run page): the history
//!   reads that run at every refresh never touch them.
//! - **A line-per-event text, tab-separated**, so that it stays readable with `psql` or
//!   `redis-cli`, costs a few bytes per line and is written straight into the capture's
//!   buffer (no allocation per event). See [`RunLog`] for the format.
//! - **Bounded by the writer** ([`RunLogWriter`]): the first lines are kept, the line reaching
//!   the byte bound is cut at a character boundary, and the number of lines not kept is
//!   stored as the last line, so a reader knows the log is not whole.

use std::fmt::{self, Write as _};

use chrono::{DateTime, Datelike, Timelike, Utc};

/// The most bytes a [`RunLogWriter`] may be told to keep for one run: 1 MiB, what every
/// store's column holds (MySQL's `MEDIUMTEXT` holds 16 MiB) without making a history read
/// that asks for logs heavy.
pub const MAX_RUN_LOG_BYTES: usize = 1 << 20;

/// A run's log lines, in the text the stores keep.
///
/// The format (version 1, stable): one record per `\n`-terminated line, fields separated by
/// a tab:
///
/// - a log line: `<at>\t<LEVEL>\t<target>\t<message>`, `at` in RFC 3339, UTC, milliseconds
///   (`2026-12-03T06:14:11.123Z`), `LEVEL` one of `TRACE`, `DEBUG`, `INFO`, `WARN`, `ERROR`,
///   the target and the message (with the event's other fields after it, `key=value`) with
///   `\`, tab, newline and carriage return escaped as `\\`, `\t`, `\n`, `\r`;
/// - last, when lines were not kept: `more\t<N>`.
///
/// ```
/// use lock_cluster::{RunLog, RunLogWriter};
/// use chrono::{TimeZone, Utc};
///
/// let at = Utc.with_ymd_and_hms(2026, 12, 3, 6, 0, 0).unwrap();
/// let mut writer = RunLogWriter::new(1, 1024);
/// writer.line(at, "INFO", "billing", |m| m.push_str("charged 3 accounts"));
/// writer.line(at, "WARN", "billing", |m| m.push_str("one more"));
/// let log = writer.finish().expect("lines were written");
/// assert_eq!(log.as_stored(), "2026-12-03T06:00:00.000Z\tINFO\tbilling\tcharged 3 accounts\nmore\t1\n");
///
/// let read = RunLog::from_stored(log.as_stored().to_owned())?;
/// let lines = read.lines()?;
/// assert_eq!((lines[0].level.as_str(), lines[0].message.as_str()), ("INFO", "charged 3 accounts"));
/// assert_eq!(read.dropped(), 1);
/// # Ok::<(), lock_cluster::RunLogError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunLog {
    text: String,
    dropped: u64,
}

/// One line of a [`RunLog`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunLogLine {
    /// When the event was emitted (the scheduler's database clock).
    pub at: DateTime<Utc>,
    /// `TRACE`, `DEBUG`, `INFO`, `WARN` or `ERROR`.
    pub level: String,
    /// The event's target (by default its module path).
    pub target: String,
    /// The event's message, followed by its other fields as `key=value`.
    pub message: String,
}

/// A stored log text that does not parse: which line, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunLogError {
    line: usize,
    reason: String,
}

impl fmt::Display for RunLogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {} of the run's log: {}", self.line, self.reason)
    }
}

impl std::error::Error for RunLogError {}

const LEVELS: [&str; 5] = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"];

impl RunLog {
    /// A log read from a store, checked: every line parses, and a `more` line is last.
    pub fn from_stored(text: String) -> Result<RunLog, RunLogError> {
        let mut dropped = 0;
        for (index, record) in records(&text).enumerate() {
            if dropped > 0 {
                return Err(RunLogError {
                    line: index + 1,
                    reason: "a line after the count of lines not kept".into(),
                });
            }
            match parse(record).map_err(|reason| RunLogError {
                line: index + 1,
                reason,
            })? {
                Record::Line(_) => {}
                Record::More(n) => dropped = n,
            }
        }
        Ok(RunLog { text, dropped })
    }

    /// The text the stores keep (see the format above).
    pub fn as_stored(&self) -> &str {
        &self.text
    }

    /// The lines kept, oldest first.
    pub fn lines(&self) -> Result<Vec<RunLogLine>, RunLogError> {
        let mut lines = Vec::new();
        for (index, record) in records(&self.text).enumerate() {
            let parsed = parse(record).map_err(|reason| RunLogError {
                line: index + 1,
                reason,
            })?;
            if let Record::Line(line) = parsed {
                lines.push(line);
            }
        }
        Ok(lines)
    }

    /// How many lines the run logged after the bound was reached (not kept).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Nothing kept and nothing dropped.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }
}

fn records(text: &str) -> impl Iterator<Item = &str> {
    text.split_terminator('\n')
}

enum Record {
    Line(RunLogLine),
    More(u64),
}

fn parse(record: &str) -> Result<Record, String> {
    if let Some(count) = record.strip_prefix("more\t") {
        return count
            .parse()
            .map(Record::More)
            .map_err(|_| format!("the count of lines not kept {count:?} is not a number"));
    }
    let mut fields = record.splitn(4, '\t');
    let (Some(at), Some(level), Some(target), Some(message)) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err("not four tab-separated fields (time, level, target, message)".into());
    };
    let at = DateTime::parse_from_rfc3339(at)
        .map_err(|error| format!("time {at:?}: {error}"))?
        .with_timezone(&Utc);
    if !LEVELS.contains(&level) {
        return Err(format!("unknown level {level:?}"));
    }
    Ok(Record::Line(RunLogLine {
        at,
        level: level.to_owned(),
        target: unescape(target)?,
        message: unescape(message)?,
    }))
}

fn unescape(field: &str) -> Result<String, String> {
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next() {
            Some('\\') => '\\',
            Some('t') => '\t',
            Some('n') => '\n',
            Some('r') => '\r',
            other => return Err(format!("a bad escape \\{}", other.unwrap_or(' '))),
        });
    }
    Ok(out)
}

/// Writes a [`RunLog`] within its bounds, straight into one buffer: what the scheduler's
/// capture of a run's events uses.
///
/// At most `max_lines` lines and `max_bytes` bytes of text are kept (the final `more` line
/// apart); the line that reaches the byte bound is cut at a character boundary, and every
/// line after the bound is only counted.
///
/// ```
/// use lock_cluster::RunLogWriter;
/// let at = chrono::Utc::now();
/// let mut writer = RunLogWriter::new(100, 40);
/// writer.line(at, "INFO", "t", |m| m.push_str("a line far too long to fit in forty bytes"));
/// writer.line(at, "INFO", "t", |m| m.push_str("dropped"));
/// let log = writer.finish().unwrap();
/// assert!(log.as_stored().len() <= 40 + "more\t1\n".len(), "{}", log.as_stored());
/// assert_eq!(log.lines().unwrap().len(), 1);
/// assert_eq!(log.dropped(), 1);
/// ```
#[derive(Clone, Debug)]
pub struct RunLogWriter {
    text: String,
    lines: usize,
    dropped: u64,
    max_lines: usize,
    max_bytes: usize,
    /// The buffer the message is formatted into before it is escaped (kept between lines).
    scratch: String,
}

impl RunLogWriter {
    /// A writer keeping at most `max_lines` lines and `max_bytes` bytes (capped at
    /// [`MAX_RUN_LOG_BYTES`]). Allocates nothing until the first line.
    pub fn new(max_lines: usize, max_bytes: usize) -> Self {
        RunLogWriter {
            text: String::new(),
            lines: 0,
            dropped: 0,
            max_lines,
            max_bytes: max_bytes.min(MAX_RUN_LOG_BYTES),
            scratch: String::new(),
        }
    }

    /// Adds one line: `message` writes the message (and fields) into the string it is given.
    /// Past a bound the line is only counted, and `message` is not called.
    pub fn line(
        &mut self,
        at: DateTime<Utc>,
        level: &str,
        target: &str,
        message: impl FnOnce(&mut String),
    ) {
        if self.lines >= self.max_lines || self.text.len() >= self.max_bytes {
            self.dropped += 1;
            return;
        }
        let start = self.text.len();
        // RFC 3339 by hand: chrono's formatting goes through a String of its own per call.
        // Writing into a String cannot fail.
        let _ = write!(
            self.text,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z\t{level}\t",
            at.year(),
            at.month(),
            at.day(),
            at.hour(),
            at.minute(),
            at.second(),
            at.timestamp_subsec_millis().min(999)
        );
        escape_into(&mut self.text, target);
        self.text.push('\t');
        let fields_start = self.text.len();
        self.scratch.clear();
        message(&mut self.scratch);
        escape_into(&mut self.text, &self.scratch);
        // The newline must fit too.
        if self.text.len() + 1 > self.max_bytes {
            if fields_start + 1 > self.max_bytes {
                // Not even the time, level and target fit: the line is not kept.
                self.text.truncate(start);
                self.dropped += 1;
                return;
            }
            let cut = crate::truncate(&self.text, self.max_bytes - 1).len();
            self.text.truncate(cut);
            // Never end inside an escape: an odd run of backslashes loses its last one.
            let trailing = self.text[fields_start..]
                .bytes()
                .rev()
                .take_while(|&b| b == b'\\')
                .count();
            if trailing % 2 == 1 {
                self.text.pop();
            }
        }
        self.text.push('\n');
        self.lines += 1;
    }

    /// The log written so far, leaving the writer empty (its bounds kept) for the next
    /// attempt of the run; `None` when nothing was logged.
    pub fn take(&mut self) -> Option<RunLog> {
        if self.lines == 0 && self.dropped == 0 {
            return None;
        }
        let mut text = std::mem::take(&mut self.text);
        if self.dropped > 0 {
            let _ = writeln!(text, "more\t{}", self.dropped);
        }
        let log = RunLog {
            text,
            dropped: self.dropped,
        };
        self.lines = 0;
        self.dropped = 0;
        Some(log)
    }

    /// The log written, `None` when nothing was logged.
    pub fn finish(mut self) -> Option<RunLog> {
        self.take()
    }
}

fn escape_into(out: &mut String, field: &str) {
    for c in field.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 3, 6, 0, 0).unwrap()
    }

    #[test]
    fn special_characters_round_trip() {
        let mut writer = RunLogWriter::new(10, 4096);
        let message = "tab\there\nnew line \\ back <b>&</b> é\r";
        writer.line(at(), "ERROR", "my target", |m| m.push_str(message));
        let log = RunLog::from_stored(writer.finish().unwrap().as_stored().to_owned()).unwrap();
        let lines = log.lines().unwrap();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].message, message);
        assert_eq!(lines[0].target, "my target");
        assert_eq!(lines[0].at, at());
        assert_eq!(log.as_stored().matches('\n').count(), 1, "one record");
    }

    #[test]
    fn the_line_bound_keeps_the_first_lines_and_counts_the_rest() {
        let mut writer = RunLogWriter::new(3, 4096);
        for i in 0..10 {
            writer.line(at(), "INFO", "t", |m| m.push_str(&format!("line {i}")));
        }
        let log = writer.finish().unwrap();
        let lines = log.lines().unwrap();
        let messages: Vec<&str> = lines.iter().map(|l| l.message.as_str()).collect();
        assert_eq!(messages, ["line 0", "line 1", "line 2"]);
        assert_eq!(log.dropped(), 7);
    }

    #[test]
    fn the_byte_bound_cuts_at_a_character_boundary_and_never_inside_an_escape() {
        for max in 30..80 {
            let mut writer = RunLogWriter::new(100, max);
            writer.line(at(), "INFO", "t", |m| m.push_str(&"é\\\n".repeat(40)));
            writer.line(at(), "INFO", "t", |m| m.push_str("after"));
            let Some(log) = writer.finish() else {
                panic!("max {max}: the second line is counted at least");
            };
            let kept = log.as_stored().len() - format!("more\t{}\n", log.dropped()).len();
            assert!(kept <= max, "max {max}: {kept} bytes kept");
            let read = RunLog::from_stored(log.as_stored().to_owned())
                .unwrap_or_else(|e| panic!("max {max}: {e}: {:?}", log.as_stored()));
            let lines = read.lines().unwrap();
            assert!(lines.len() <= 1, "max {max}");
            assert_eq!(read.dropped() as usize, 2 - lines.len(), "max {max}");
        }
    }

    #[test]
    fn take_leaves_an_empty_writer_with_its_bounds() {
        let mut writer = RunLogWriter::new(1, 4096);
        writer.line(at(), "INFO", "t", |m| m.push_str("first"));
        writer.line(at(), "INFO", "t", |m| m.push_str("second"));
        assert_eq!(writer.take().unwrap().dropped(), 1);
        assert!(writer.take().is_none());
        writer.line(at(), "INFO", "t", |m| m.push_str("third"));
        let log = writer.take().unwrap();
        assert_eq!(log.lines().unwrap()[0].message, "third");
        assert_eq!(log.dropped(), 0);
    }

    #[test]
    fn a_bad_text_names_its_line() {
        let good = "2026-12-03T06:00:00.000Z\tINFO\tt\tok\n";
        for (bad, reason) in [
            ("2026-12-03T06:00:00.000Z\tLOUD\tt\tx\n", "unknown level"),
            ("yesterday\tINFO\tt\tx\n", "time"),
            ("2026-12-03T06:00:00.000Z\tINFO\tt\n", "four"),
            ("2026-12-03T06:00:00.000Z\tINFO\tt\t\\q\n", "escape"),
            ("more\tmany\n", "not a number"),
        ] {
            let error = RunLog::from_stored(format!("{good}{bad}")).unwrap_err();
            assert!(error.to_string().starts_with("line 2 "), "{error}");
            assert!(error.to_string().contains(reason), "{error}");
        }
        let error = RunLog::from_stored(format!("more\t1\n{good}")).unwrap_err();
        assert!(error.to_string().contains("after the count"), "{error}");
    }
}
