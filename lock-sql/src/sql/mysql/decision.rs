//! The acquire's decision as one SQL expression over named operands, so that the single
//! statement and the batch decide with the very same expression.
//!
//! Decisions, and why:
//!
//! - **One builder, two sets of operands.** In the single statement the request's values are
//!   `?` parameters, the lock row's columns are the table's own and the clock is the
//!   statement's ([`NOW`](super::NOW), [`DECIDED_AT`](super::DECIDED_AT)); in the batch the
//!   request's values are a request row's columns, the lock row's columns are qualified and the
//!   clock is the batch's (read once, see `batch.rs`). The text of each piece is written once,
//!   here, in the order the single statement's parameters are listed.
//! - **The code is the single statement's `last_insert_id`.** A grant's code is the new fence
//!   (1 in the ShedLock shape), a refusal's carries the reason and a time; the batch reads the
//!   codes as rows and [`Statements::outcome_of_code`](super::Statements) decodes both the same
//!   way.

use super::{
    HELD_BY_REQUESTER, HELD_SLOT_RAN, OTHER_NAME, REFUSED, SLOT_ALREADY_RUN, SLOT_IN_FUTURE,
    TOO_LATE, to_seconds,
};

/// What the decision reads: the lock row's columns, the request's values and the clock, each
/// as SQL text (a column, a `?`, a request row's column).
pub(super) struct Operands<'a> {
    /// The lock row's `name` column.
    pub(super) name: &'a str,
    /// The lock row's `lock_until` column.
    pub(super) lock_until: &'a str,
    /// The lock row's `locked_by` column.
    pub(super) locked_by: &'a str,
    /// The lock row's `fence` column (extended shape).
    pub(super) fence: &'a str,
    /// The lock row's `last_fire` column (extended shape).
    pub(super) last_fire: &'a str,
    /// The requested name.
    pub(super) requested_name: &'a str,
    /// The requester's instance id.
    pub(super) requester: &'a str,
    /// The request's slot (nullable).
    pub(super) slot: &'a str,
    /// The request's `max_slot_lead`, microseconds.
    pub(super) lead: &'a str,
    /// The request's `give_up_at` (nullable).
    pub(super) give_up_at: &'a str,
    /// The server's now on the columns' millisecond grid.
    pub(super) now: &'a str,
    /// The server's clock when the row is decided.
    pub(super) decided_at: &'a str,
}

impl Operands<'_> {
    /// The row found under the name column's collation is another name's. Params: name.
    pub(super) fn other_name(&self) -> String {
        format!(
            "CAST({} AS BINARY) <> CAST({} AS BINARY)",
            self.name, self.requested_name
        )
    }

    /// Decided after the request's `give_up_at`. Params: give_up_at (x2).
    pub(super) fn late(&self) -> String {
        format!(
            "({give_up_at} IS NOT NULL AND {decided_at} > {give_up_at})",
            give_up_at = self.give_up_at,
            decided_at = self.decided_at
        )
    }

    /// The refusal code of a request decided too late.
    pub(super) fn too_late(&self) -> String {
        format!("{REFUSED} + {TOO_LATE} + {}", to_seconds(self.now))
    }

    /// The slot is too far ahead of the server's now. Params: slot, lead.
    pub(super) fn ahead(&self) -> String {
        format!(
            "{} > {} + INTERVAL {} MICROSECOND",
            self.slot, self.now, self.lead
        )
    }

    /// The refusal code of a slot too far ahead.
    pub(super) fn in_future(&self) -> String {
        format!("{REFUSED} + {SLOT_IN_FUTURE} + {}", to_seconds(self.now))
    }

    /// The update path's decision code (extended shape). Params: name, give_up_at (x2),
    /// slot (x3), lead, slot, lead, slot (x2), locked_by.
    pub(super) fn code_extended(&self) -> String {
        let Operands {
            lock_until,
            locked_by,
            fence,
            last_fire,
            requester,
            slot,
            lead,
            now,
            ..
        } = self;
        let free = format!(
            "{lock_until} <= {now} AND ({slot} IS NULL OR (({last_fire} IS NULL OR \
             {last_fire} < {slot}) AND {slot} <= {now} + INTERVAL {lead} MICROSECOND))"
        );
        // Held: whether this slot ran too, so that a fire that asked ahead of its slot does
        // not ask again at the slot for a slot another instance already took.
        let held_until = format!(
            "{REFUSED} + IF({slot} IS NOT NULL AND {last_fire} >= {slot}, {HELD_SLOT_RAN}, 0) + \
             IF({locked_by} = {requester}, {HELD_BY_REQUESTER}, 0) + {}",
            to_seconds(lock_until)
        );
        let refusal = format!(
            "IF({}, {}, IF({lock_until} > {now}, {held_until}, {REFUSED} + {SLOT_ALREADY_RUN} + {}))",
            self.ahead(),
            self.in_future(),
            to_seconds(&format!("COALESCE({last_fire}, {lock_until})"))
        );
        format!(
            "IF({}, {REFUSED} + {OTHER_NAME}, IF({}, {}, IF({free}, GREATEST({fence}, 0) + 1, {refusal})))",
            self.other_name(),
            self.late(),
            self.too_late()
        )
    }

    /// The update path's decision code (ShedLock's four columns). Params: name, give_up_at
    /// (x2), locked_by.
    pub(super) fn code_shedlock(&self) -> String {
        let Operands {
            lock_until,
            locked_by,
            requester,
            now,
            ..
        } = self;
        let held_until = format!(
            "{REFUSED} + IF({locked_by} = {requester}, {HELD_BY_REQUESTER}, 0) + {}",
            to_seconds(lock_until)
        );
        format!(
            "IF({}, {REFUSED} + {OTHER_NAME}, IF({}, {}, IF({lock_until} <= {now}, 1, {held_until})))",
            self.other_name(),
            self.late(),
            self.too_late()
        )
    }
}
