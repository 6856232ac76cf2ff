use super::*;
use crate::LockTableConfig;
use lock_core::FireSlot;
use std::sync::Arc;

fn statements(extended: bool) -> Statements {
    let table = Table::new(&LockTableConfig::default()).unwrap();
    Statements::new(
        &table,
        Shape {
            extended,
            zone_sensitive: false,
        },
    )
}

fn request() -> LockRequest {
    LockRequest {
        name: Arc::from("job"),
        locked_by: Arc::from("me"),
        lock_at_most_for: Duration::from_micros(10),
        slot: FireSlot::from_unix_millis(1_700_000_000_000),
        max_slot_lead: lock_core::DEFAULT_MAX_SLOT_LEAD,
        give_up_at: None,
    }
}

#[test]
fn placeholders_match_params() {
    for extended in [true, false] {
        let s = statements(extended);
        let lease = Lease::granted(&request(), 3);
        let cases = [
            s.acquire(&request()),
            s.release(&lease, Duration::ZERO),
            s.extend(&lease, Duration::from_secs(1)),
        ];
        for (sql, params) in cases {
            assert_eq!(sql.matches('?').count(), params.len(), "{sql}");
        }
    }
}

#[test]
fn a_lease_is_at_least_a_millisecond() {
    let (_, values) = statements(true).acquire(&request());
    // The inserted row's lock_until (after name, give_up_at twice, slot and lead).
    assert_eq!(values[5], SqlValue::Int(1000));
}

#[test]
fn outcomes() {
    let s = statements(true);
    let r = request();
    let fence = |o: Option<AcquireOutcome>| match o {
        Some(AcquireOutcome::Acquired(lease)) => lease.fence(),
        other => panic!("{other:?}"),
    };
    assert_eq!(fence(s.acquire_outcome(&r, 0, 1)), 1);
    assert_eq!(fence(s.acquire_outcome(&r, 42, 2)), 42);
    assert_eq!(s.acquire_outcome(&r, 0, 0), None);
    let held = REFUSED + UNIX_EPOCH_TO_SECONDS + 1_700_000_000;
    match s.acquire_outcome(&r, held, 0) {
        Some(AcquireOutcome::Refused(refusal)) => {
            assert_eq!(refusal.reason, RefusalReason::Held);
            assert_eq!(refusal.lock_until.unwrap().timestamp(), 1_700_000_000);
            assert_eq!(refusal.last_fire, None);
        }
        other => panic!("{other:?}"),
    }
    match s.acquire_outcome(&r, held + SLOT_ALREADY_RUN, 1) {
        Some(AcquireOutcome::Refused(refusal)) => {
            assert_eq!(refusal.reason, RefusalReason::SlotAlreadyRun);
            assert_eq!(refusal.last_fire.unwrap().timestamp(), 1_700_000_000);
        }
        other => panic!("{other:?}"),
    }
    match s.acquire_outcome(&r, held + HELD_SLOT_RAN, 1) {
        Some(AcquireOutcome::Refused(refusal)) => {
            assert_eq!(refusal.reason, RefusalReason::Held);
            assert_eq!(refusal.last_fire, r.slot.map(FireSlot::instant));
            assert_eq!(refusal.locked_by, None);
        }
        other => panic!("{other:?}"),
    }
    match s.acquire_outcome(&r, held + HELD_BY_REQUESTER, 1) {
        Some(AcquireOutcome::Refused(refusal)) => {
            assert_eq!(refusal.reason, RefusalReason::Held);
            assert_eq!(refusal.locked_by.as_deref(), Some("me"));
            assert_eq!(refusal.lock_until.unwrap().timestamp(), 1_700_000_000);
        }
        other => panic!("{other:?}"),
    }
    let now = 1_700_000_100;
    match s.acquire_outcome(&r, REFUSED + TOO_LATE + UNIX_EPOCH_TO_SECONDS + now, 1) {
        Some(AcquireOutcome::Refused(refusal)) => {
            assert_eq!(refusal.reason, RefusalReason::TooLate);
            assert_eq!(refusal.database_now.unwrap().timestamp(), now as i64);
        }
        other => panic!("{other:?}"),
    }
    match s.acquire_outcome(
        &r,
        REFUSED + SLOT_IN_FUTURE + UNIX_EPOCH_TO_SECONDS + now,
        1,
    ) {
        Some(AcquireOutcome::Refused(refusal)) => {
            assert_eq!(refusal.reason, RefusalReason::SlotInFuture);
            assert_eq!(refusal.database_now.unwrap().timestamp(), now as i64);
        }
        other => panic!("{other:?}"),
    }
    let shedlock = statements(false);
    assert_eq!(fence(shedlock.acquire_outcome(&r, 1, 2)), 0);
    assert_eq!(fence(shedlock.acquire_outcome(&r, 0, 1)), 0);
}
