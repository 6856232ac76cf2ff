//! What may reach the operator's terminal. Names, holders, hosts and error texts come from the
//! database, where ShedLock in Java, an older version or anyone with write access may have put
//! a newline (a forged table row), an ESC sequence (a cleared screen, a retitled window) or a
//! bidirectional control (text shown reversed). lockctl shows each such character escaped, as
//! Rust writes it in a string literal (`\n`, `\u{1b}`, `\u{202e}`), so the operator sees that it
//! is there and the terminal never receives it.
//!
//! Decisions, and why:
//! - Two steps: each value from the database is escaped where it is put into a cell or a
//!   message ([`visible`], newlines included), and everything written to stdout or stderr
//!   passes [`lines`] (every such character but the newlines lockctl itself writes), so a value
//!   a message forgot cannot reach the terminal raw either.
//! - JSON keeps its values exact: [`json`] writes the same characters as `\uXXXX` escapes,
//!   which a JSON reader decodes back to the stored name.
//! - A backslash is shown as it is: names with one are legal, and the escaped form is for
//!   reading. To act on such a row, pass the name as stored (`lockctl unlock $'nl\nx' --force`).

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` must not reach a terminal raw: a control character (C0, DEL, C1), a
/// bidirectional control, or a line or paragraph separator.
fn unsafe_on_terminal(c: char) -> bool {
    c.is_control() || lock_trigger::is_bidi_control(c) || matches!(c, '\u{2028}' | '\u{2029}')
}

fn escape(c: char, out: &mut String) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\0' => out.push_str("\\0"),
        c => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
}

fn escaped(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(|c| unsafe_on_terminal(c) && !keep(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_on_terminal(c) && !keep(c) {
            escape(c, &mut out);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A value from the database as one line of visible text: `nl\nx` for a name with a newline.
pub(crate) fn visible(text: &str) -> Cow<'_, str> {
    escaped(text, |_| false)
}

/// Text lockctl writes to stdout or stderr: its own newlines kept, every other control,
/// bidirectional or separator character escaped.
pub(crate) fn lines(text: &str) -> Cow<'_, str> {
    escaped(text, |c| c == '\n')
}

/// Serialized JSON with the characters [`visible`] escapes written as `\uXXXX`: the same JSON
/// value (they can only occur inside strings), and nothing a terminal acts on.
pub(crate) fn json(text: String) -> String {
    if !text.chars().any(unsafe_on_terminal) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_on_terminal(c) && c != '\n' {
            // Every such character is in the Basic Multilingual Plane: one `\uXXXX`.
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_one_visible_line() {
        assert_eq!(visible("sync_bill"), "sync_bill");
        assert!(matches!(visible("sync_bill"), Cow::Borrowed(_)));
        assert_eq!(visible("nl\nbilling  free"), "nl\\nbilling  free");
        assert_eq!(visible("\u{1b}]0;pwned\u{7}"), "\\u{1b}]0;pwned\\u{7}");
        assert_eq!(visible("\u{202e}fdp.exe"), "\\u{202e}fdp.exe");
        assert_eq!(
            visible("a\0b\r\t\u{9b}\u{2028}"),
            "a\\0b\\r\\t\\u{9b}\\u{2028}"
        );
        assert_eq!(visible("تقرير"), "تقرير");
    }

    #[test]
    fn output_keeps_its_own_newlines_only() {
        assert_eq!(lines("a\nb\u{1b}[2J\n"), "a\nb\\u{1b}[2J\n");
    }

    #[test]
    fn json_stays_the_same_value() {
        let name = "nl\n\u{1b}[2J\u{202e}\u{9b}\u{7f}";
        let text = json(serde_json::to_string_pretty(&[name]).unwrap());
        assert!(
            !text.chars().any(|c| unsafe_on_terminal(c) && c != '\n'),
            "{text}"
        );
        let back: Vec<String> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, [name]);
    }
}
