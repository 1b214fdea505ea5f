//! Recovery markers: merging and validation against the log.

use actionstate_core::{Error, LogIdentity, Marker};

fn log(id: &str, partitions: u32) -> LogIdentity {
    LogIdentity { backend: "file".into(), id: id.into(), partitions }
}

fn marker(id: &str, offsets: &[u64]) -> Marker {
    Marker::new(log(id, u32::try_from(offsets.len()).unwrap()), offsets.to_vec())
}

#[test]
fn marker_merge_takes_min_per_partition() {
    let a = marker("t1", &[5, 0, 9, 100]);
    let b = marker("t1", &[3, 7, 9, 200]);
    let c = marker("t1", &[4, 2, 10, 150]);
    let merged = Marker::merge([&a, &b, &c]).unwrap().unwrap();
    assert_eq!(merged, marker("t1", &[3, 0, 9, 100]));
    // Order does not matter.
    assert_eq!(Marker::merge([&c, &a, &b]).unwrap().unwrap(), merged);
    assert_eq!(Marker::merge([&a]).unwrap().unwrap(), a);
    assert_eq!(Marker::merge([&a, &a]).unwrap().unwrap(), a);
    assert_eq!(Marker::merge(std::iter::empty::<&Marker>()).unwrap(), None);
}

#[test]
fn marker_merge_rejects_mixed_logs() {
    let a = marker("t1", &[5, 6]);
    let other_id = marker("t2", &[1, 1]);
    let err = Marker::merge([&a, &other_id]).unwrap_err();
    assert!(
        matches!(&err, Error::MixedMarkers { first, second } if *first == a.log.to_string() && *second == other_id.log.to_string()),
        "{err:?}"
    );
    let other_backend = Marker::new(LogIdentity { backend: "kafka".into(), ..a.log.clone() }, vec![1, 1]);
    assert!(matches!(Marker::merge([&a, &other_backend]), Err(Error::MixedMarkers { .. })));
    let other_partitions = marker("t1", &[1, 1, 1]);
    assert!(matches!(Marker::merge([&a, &other_partitions]), Err(Error::MixedMarkers { .. })));
    // Same identity but a malformed offset list.
    let short = Marker::new(a.log.clone(), vec![1]);
    assert!(matches!(Marker::merge([&a, &short]), Err(Error::MixedMarkers { .. })));
    // A mismatch anywhere in the sequence is caught.
    assert!(matches!(Marker::merge([&a, &a, &other_id, &a]), Err(Error::MixedMarkers { .. })));
}

#[test]
fn marker_validate_log_changed() {
    let m = marker("t1", &[1, 2]);
    for current in [log("t2", 2), log("t1", 3), LogIdentity { backend: "kafka".into(), ..log("t1", 2) }] {
        let err = m.validate(&current, &[0, 0, 0], &[10, 10, 10]).unwrap_err();
        assert!(
            matches!(&err, Error::LogChanged { expected, found } if *expected == m.log.to_string() && *found == current.to_string()),
            "{err:?}"
        );
    }
}

#[test]
fn marker_validate_unknown_partition() {
    let current = log("t1", 3);
    // More offsets than the log has partitions: partition 3 is the first unknown one.
    let long = Marker::new(current.clone(), vec![0, 0, 0, 0, 0]);
    let err = long.validate(&current, &[0; 5], &[10; 5]).unwrap_err();
    assert!(matches!(err, Error::UnknownPartition { partition: 3, partitions: 3, .. }), "{err:?}");
    // Fewer offsets than partitions: partition 2 has no offset in the marker.
    let short = Marker::new(current.clone(), vec![0, 0]);
    let err = short.validate(&current, &[0; 3], &[10; 3]).unwrap_err();
    assert!(matches!(err, Error::UnknownPartition { partition: 2, partitions: 3, .. }), "{err:?}");
    // End offsets missing for a partition of the marker.
    let m = marker("t1", &[0, 0, 0]);
    let err = m.validate(&current, &[0, 0, 0], &[10, 10]).unwrap_err();
    assert!(matches!(err, Error::UnknownPartition { partition: 2, partitions: 2, .. }), "{err:?}");
    assert!(err.to_string().contains("unknown partition 2"), "{err}");
}

#[test]
fn marker_validate_offsets() {
    let current = log("t1", 3);
    let earliest = [0, 5, 5];
    let end = [10, 10, 20];
    // Exact bounds are valid: offset == earliest and offset == end.
    marker("t1", &[0, 5, 20]).validate(&current, &earliest, &end).unwrap();
    marker("t1", &[10, 10, 5]).validate(&current, &earliest, &end).unwrap();
    marker("t1", &[3, 7, 11]).validate(&current, &earliest, &end).unwrap();

    let err = marker("t1", &[0, 11, 5]).validate(&current, &earliest, &end).unwrap_err();
    assert!(matches!(err, Error::OffsetBeyondEnd { partition: 1, offset: 11, end: 10 }), "{err:?}");
    let err = marker("t1", &[0, 5, 21]).validate(&current, &earliest, &end).unwrap_err();
    assert!(matches!(err, Error::OffsetBeyondEnd { partition: 2, offset: 21, end: 20 }), "{err:?}");

    let err = marker("t1", &[0, 5, 4]).validate(&current, &earliest, &end).unwrap_err();
    assert!(matches!(err, Error::DataLoss { partition: 2, offset: 4, earliest: 5 }), "{err:?}");
    let err = marker("t1", &[0, 4, 5]).validate(&current, &earliest, &end).unwrap_err();
    assert!(matches!(err, Error::DataLoss { partition: 1, offset: 4, earliest: 5 }), "{err:?}");

    // The first failing partition is reported.
    let err = marker("t1", &[11, 0, 99]).validate(&current, &earliest, &end).unwrap_err();
    assert!(matches!(err, Error::OffsetBeyondEnd { partition: 0, offset: 11, end: 10 }), "{err:?}");

    // An empty log (earliest == end) accepts exactly that offset.
    let empty_end = [7, 7, 7];
    marker("t1", &[7, 7, 7]).validate(&current, &empty_end, &empty_end).unwrap();
    let err = marker("t1", &[7, 6, 7]).validate(&current, &empty_end, &empty_end).unwrap_err();
    assert!(matches!(err, Error::DataLoss { partition: 1, offset: 6, earliest: 7 }), "{err:?}");
}
