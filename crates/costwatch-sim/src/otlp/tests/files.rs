//! The file exporter's files.

use super::*;

#[test]
fn rotation_writes_several_files_whose_union_is_the_range() {
    let d = fixture();
    let (from, to) = (ts("2026-10-11T11:00:00Z"), ts("2026-10-11T12:00:00Z"));
    let requests = export_requests(&d, from, to, 8);
    assert_eq!(requests.len(), 11);
    let dir = tempfile::tempdir().unwrap();
    let paths = write_json_lines(dir.path(), &requests, 3).unwrap();
    assert_eq!(paths.len(), 4);
    let names: Vec<String> = paths
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_owned())
        .collect();
    assert_eq!(names.last().map(String::as_str), Some(CURRENT_FILE));
    let mut rotated = Vec::new();
    for name in &names[..3] {
        let stamp = name
            .strip_prefix("traces-")
            .and_then(|n| n.strip_suffix(".json"))
            .unwrap();
        let at = chrono::NaiveDateTime::parse_from_str(stamp, "%Y-%m-%dT%H-%M-%S%.3f")
            .unwrap()
            .and_utc();
        assert_eq!(stamp.len(), "2022-09-14T05-02-14.173".len());
        rotated.push(at);
    }
    assert!(rotated.windows(2).all(|w| w[0] < w[1]), "{names:?}");
    assert!(rotated[0] > from && rotated[2] < to + Duration::minutes(5));
    let on_disk: BTreeSet<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(on_disk, names.iter().cloned().collect());

    let mut seen = BTreeSet::new();
    let mut lines = 0;
    for path in &paths {
        for line in std::fs::read_to_string(path).unwrap().lines() {
            lines += 1;
            let request: ExportTraceServiceRequest = serde_json::from_str(line).unwrap();
            for (_, span) in flatten(&[request]) {
                assert!(seen.insert(span.span_id), "a span in two lines");
            }
        }
    }
    assert_eq!(lines, requests.len());
    let expected: BTreeSet<Vec<u8>> = d
        .requests_in(from, to, &[], None)
        .iter()
        .map(|r| span_id(&r.request_id).to_vec())
        .collect();
    assert_eq!(seen, expected);
}

#[test]
fn nothing_to_write_leaves_an_empty_current_file() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_json_lines(&dir.path().join("new"), &[], 5).unwrap();
    assert_eq!(paths, vec![dir.path().join("new").join(CURRENT_FILE)]);
    assert_eq!(std::fs::read_to_string(&paths[0]).unwrap(), "");
}
