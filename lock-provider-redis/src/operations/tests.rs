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
