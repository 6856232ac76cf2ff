use super::*;

#[test]
fn a_cut_off_between_milliseconds_rounds_up() {
    let at = |ms: i64, ns: u32| {
        DateTime::from_timestamp_millis(ms).unwrap() + chrono::TimeDelta::nanoseconds(ns.into())
    };
    assert_eq!(cut_off(at(1_000, 0)), "1000");
    // A run stored at 1000 ms started before 1000.0005 ms.
    assert_eq!(cut_off(at(1_000, 500)), "1001");
}

#[test]
fn rows_parse_with_their_absent_fields() {
    let s = |x: &str| Value::BulkString(x.as_bytes().to_vec());
    let run = run_row(&[
        s("7"),
        s("report"),
        Value::Nil,
        s("manual"),
        s("host:1:a"),
        s("3"),
        s("1700000000000"),
        Value::Nil,
        s("running"),
        Value::Nil,
    ])
    .unwrap();
    assert_eq!((run.id, run.fence, run.slot), (7, 3, None));
    assert_eq!(run.fire_kind, FireKind::Manual);
    assert_eq!((run.outcome, run.ended_at), (RunState::Running, None));
    assert!(run_row(&[s("7")]).is_err(), "a row without its job");
    let instance = registry_row(&[
        s("host:1:a"),
        s(""),
        s(""),
        s(""),
        Value::Nil,
        Value::Nil,
        Value::Nil,
        s("host"),
        s("42"),
        s("0.1.0"),
        s("1700000000000"),
        s("-3"),
        s("1000"),
        s("1700000001000"),
    ])
    .unwrap();
    assert_eq!(instance.job, None);
    assert_eq!(
        (instance.instance.pid, instance.instance.clock_offset_ms),
        (42, -3)
    );
}

#[test]
fn control_and_run_rows_read_their_slot_and_parameters() {
    let s = |x: &str| Value::BulkString(x.as_bytes().to_vec());
    let after = control_row(&[
        s("9"),
        s("report"),
        s("after"),
        s("1700000000000"),
        s("billing#2"),
        Value::Nil,
        Value::Nil,
        s("1700000000123"),
        Value::Nil,
    ])
    .unwrap();
    assert_eq!(after.kind, ControlKind::After);
    assert_eq!(
        after.slot.map(|slot| slot.timestamp_millis()),
        Some(1_700_000_000_123)
    );
    assert!(after.params.is_empty());
    // A row written before the slot and parameters were kept.
    let old = control_row(&[
        s("3"),
        s("report"),
        s("trigger"),
        s("1700000000000"),
        s("op"),
    ])
    .unwrap();
    assert_eq!((old.slot, old.params.is_empty()), (None, true));
    let mut trigger = vec![
        s("4"),
        s("report"),
        s("trigger"),
        s("1700000000000"),
        s("op"),
        Value::Nil,
        Value::Nil,
        Value::Nil,
        s("day=2026-12-01&q=a%26b"),
    ];
    let read = control_row(&trigger).unwrap();
    assert_eq!(read.params.get("q"), Some("a&b"));
    trigger[8] = s("bad key=1");
    let error = control_row(&trigger).unwrap_err();
    assert!(
        error.contains("control request 4 of job `report`"),
        "{error}"
    );
    let run = |params: Value| {
        run_row(&[
            s("7"),
            s("report"),
            Value::Nil,
            s("manual"),
            s("host:1:a"),
            s("3"),
            s("1700000000000"),
            Value::Nil,
            s("running"),
            Value::Nil,
            s("1"),
            s("0"),
            params,
        ])
    };
    assert_eq!(run(s("day=x")).unwrap().params.get("day"), Some("x"));
    assert!(run(Value::Nil).unwrap().params.is_empty());
    let error = run(s("=x")).unwrap_err();
    assert!(error.contains("run 7 of job `report`"), "{error}");
}

#[test]
fn an_incident_row_reads_back_and_needs_its_opening_time() {
    let s = |x: &str| Value::BulkString(x.as_bytes().to_vec());
    let open =
        incidents::incident_row(&[s("instance_gone/web-2"), s(""), s("1700000000123")]).unwrap();
    assert_eq!(open.key, "instance_gone/web-2");
    assert_eq!(open.summary, "", "an empty summary is a summary");
    assert_eq!(open.opened_at.timestamp_millis(), 1_700_000_000_123);
    let error = incidents::incident_row(&[s("k"), s("x")]).unwrap_err();
    assert!(error.contains("opening time"), "{error}");
}
