//! The direct reader against serde, on pages generated to cover the plain
//! shape and every way out of it, and on the same pages corrupted byte by
//! byte. Whenever the reader gives a page, serde must give the same one;
//! whenever a page is plain, the reader must give it.

use super::{Scan, page};
use crate::decode::json as parse;
use crate::source::json::scanner::testing::{Gen, Pool, Rng, Tally, corrupted, generated};
use crate::source::reference::wire::{Page, WireRequest, WireSession};
use serde::de::DeserializeOwned;
use std::fmt::Debug;

const STR: Pool = Pool {
    plain: &[
        "\"a\"",
        "\"support-agent-47bd564ff9a1\"",
        "\"\"",
        "\"ünï 🙂\"",
    ],
    other: &[
        "\"a\\\"b\"",
        "\"tab\\t\"",
        "\"\\u00e9\"",
        "\"bad\\q\"",
        "\"raw\u{1}\"",
        "7",
        "null",
    ],
};
const COUNT: Pool = Pool {
    plain: &[
        "0",
        "1",
        "17",
        "54505",
        "4294967295",
        "18446744073709551615",
    ],
    other: &[
        "18446744073709551616",
        "-1",
        "-0",
        "1.0",
        "1e2",
        "01",
        "null",
        "\"5\"",
        "1.",
        "true",
    ],
};
const COST: Pool = Pool {
    plain: &[
        "0",
        "0.0810025",
        "0.007671",
        "0.00126872",
        "12",
        "0.5",
        "1234.5678",
        "-0.25",
        "1e-3",
        "2.5E+2",
        "-0",
        "123456789012345678901234567890",
        "0.12345678901234567890123",
        "9007199254740993.5",
        "0.30000000000000004",
    ],
    other: &[
        "1e400", "null", "\"0.1\"", ".5", "1.", "+1", "0x10", "--1", "1e", "NaN",
    ],
};
const TIME: Pool = Pool {
    plain: &[
        "\"2026-11-02T12:00:00.000Z\"",
        "\"2026-11-02T12:00:07.307Z\"",
        "\"2026-11-02T12:00:07Z\"",
        "\"2026-11-02T14:00:07.5+02:00\"",
        "null",
    ],
    other: &["\"noon\"", "5", "\"2026-02-30T00:00:00Z\"", "{}"],
};
const MODELS: Pool = Pool {
    plain: &[
        "[]",
        "[\"gpt-6-luna\"]",
        "[\"z\", \"a\"]",
        "[\"m\",\"n\",\"o\"]",
    ],
    other: &["[\"m\",3]", "null", "{}", "[\"m\",]", "[\"a\\u0062\"]"],
};
const LABELS: Pool = Pool {
    plain: &[
        "{}",
        "{\"env\":\"prod\",\"feature\":\"research\"}",
        "{\"feature\":\"a\",\"feature\":\"b\"}",
        "{ \"team\" : \"x\" }",
    ],
    other: &[
        "{\"n\":1}",
        "null",
        "[]",
        "{\"a\":\"b\",}",
        "{\"k\\n\":\"v\"}",
    ],
};
const STATUS: Pool = Pool {
    plain: &["\"success\"", "\"error\""],
    other: &["\"Success\"", "\"failed\"", "null", "1"],
};
const HTTP: Pool = Pool {
    plain: &["null", "200", "429", "65535"],
    other: &["65536", "-1", "\"500\"", "2.0"],
};
const OPT_STR: Pool = Pool {
    plain: &["null", "\"RateLimitError\"", "\"\""],
    other: &["\"Time\\/out\"", "3", "[]"],
};

impl Gen {
    fn usage(&mut self) -> String {
        let mut fields = Vec::new();
        for (key, pool) in [
            ("requests", &COUNT),
            ("input_tokens", &COUNT),
            ("cached_tokens", &COUNT),
            ("output_tokens", &COUNT),
            ("cost_usd", &COST),
        ] {
            if self.rng.chance(80) {
                let v = self.value(pool, 2);
                fields.push((key.to_owned(), v));
            }
        }
        self.object(fields, true)
    }

    fn by_model(&mut self) -> String {
        let mut fields = Vec::new();
        for _ in 0..self.rng.below(4) {
            let model = self
                .rng
                .pick(&["m", "gpt-6-luna", "claude-sonnet-5.5", "a"]);
            let usage = self.usage();
            fields.push((model.to_owned(), usage));
        }
        // An object whose values are not usage objects.
        if self.rng.chance(2) {
            self.plain = false;
            fields.push(("m".to_owned(), "3".to_owned()));
        }
        self.object(fields, false)
    }

    fn session(&mut self) -> String {
        let mut fields = self.fields(&[
            ("session_id", &STR, true),
            ("first_request_at", &TIME, false),
            ("last_request_at", &TIME, false),
            ("requests", &COUNT, true),
            ("errors", &COUNT, false),
            ("input_tokens", &COUNT, true),
            ("cached_tokens", &COUNT, false),
            ("cache_write_tokens", &COUNT, false),
            ("output_tokens", &COUNT, false),
            ("cost_usd", &COST, true),
            ("models", &MODELS, false),
            ("labels", &LABELS, false),
        ]);
        if self.rng.chance(70) {
            let v = self.by_model();
            fields.push(("by_model".to_owned(), v));
        }
        self.object(fields, true)
    }

    fn request(&mut self) -> String {
        let fields = self.fields(&[
            ("request_id", &STR, true),
            ("session_id", &STR, true),
            ("created_at", &TIME, true),
            ("model", &STR, true),
            ("status", &STATUS, true),
            ("http_status", &HTTP, false),
            ("error_type", &OPT_STR, false),
            ("input_tokens", &COUNT, true),
            ("cached_tokens", &COUNT, false),
            ("cache_write_tokens", &COUNT, false),
            ("output_tokens", &COUNT, false),
            ("cost_usd", &COST, true),
        ]);
        // `created_at` cannot be null.
        if fields.iter().any(|(k, v)| k == "created_at" && v == "null") {
            self.plain = false;
        }
        self.object(fields, true)
    }

    fn page(&mut self, row: fn(&mut Gen) -> String) -> String {
        let rows: Vec<String> = (0..self.rng.below(6)).map(|_| row(self)).collect();
        let mut fields = vec![("data".to_owned(), format!("[{}]", rows.join(",")))];
        match self.rng.below(4) {
            0 => {}
            1 => fields.push(("next_cursor".to_owned(), "null".to_owned())),
            _ => {
                let v = self.value(&OPT_STR, 3);
                fields.push(("next_cursor".to_owned(), v));
            }
        }
        let out = self.object(fields, true);
        self.end_page(out)
    }
}

/// Checks the reader against serde on `text`; `plain` says the reader must
/// read it.
fn agree<T: Scan + DeserializeOwned + Debug>(text: &str, plain: bool, tally: &mut Tally) {
    let fast = page::<T>(text).map(|p| format!("{p:?}"));
    let slow = parse::<Page<T>>(text.as_bytes()).map(|p| format!("{p:?}"));
    tally.agree(text, plain, fast, slow);
}

fn generated_pages<T: Scan + DeserializeOwned + Debug>(row: fn(&mut Gen) -> String) -> Tally {
    generated(4000, |g| g.page(row), agree::<T>)
}

#[test]
fn generated_session_pages_read_as_serde_reads_them() {
    let t = generated_pages::<WireSession>(Gen::session);
    // The generator reaches all three outcomes, each often.
    t.assert_at_least(1000, 100, 100);
}

#[test]
fn generated_request_pages_read_as_serde_reads_them() {
    let t = generated_pages::<WireRequest>(Gen::request);
    // The generator reaches all three outcomes, each often.
    t.assert_at_least(1000, 50, 100);
}

/// Plain pages with one byte deleted, inserted, replaced, or the text cut:
/// whatever the reader still reads, serde reads the same.
fn corrupted_pages<T: Scan + DeserializeOwned + Debug>(row: fn(&mut Gen) -> String) -> Tally {
    corrupted(
        |g| g.page(row),
        |text, tally| agree::<T>(text, false, tally),
    )
}

#[test]
fn corrupted_session_pages_read_as_serde_reads_them() {
    let t = corrupted_pages::<WireSession>(Gen::session);
    t.assert_at_least(1000, 0, 5000);
}

#[test]
fn corrupted_request_pages_read_as_serde_reads_them() {
    let t = corrupted_pages::<WireRequest>(Gen::request);
    t.assert_at_least(1000, 0, 5000);
}

#[test]
fn numbers_are_the_doubles_serde_json_makes() {
    let mut rng = Rng(42);
    let mut texts: Vec<String> = Vec::new();
    for _ in 0..20_000 {
        let int = rng.next() >> rng.below(64);
        let frac_digits = rng.below(25);
        let frac: String = (0..frac_digits)
            .map(|_| char::from(b'0' + rng.below(10) as u8))
            .collect();
        let mut t = int.to_string();
        if !frac.is_empty() {
            t = format!("{t}.{frac}");
        }
        if rng.chance(10) {
            t = format!("{t}e{}", rng.below(40) as i64 - 20);
        }
        if rng.chance(10) {
            t = format!("-{t}");
        }
        texts.push(t);
    }
    for t in &texts {
        let mut s = super::Scanner::new(t);
        let fast = s.f64().map(f64::to_bits);
        let serde = serde_json::from_str::<f64>(t).ok().map(f64::to_bits);
        assert_eq!(fast, serde, "{t}");
    }
}

#[test]
fn a_served_page_is_read_directly() {
    let body = r#"{"data":[{"by_model":{"gpt-6.1-sol":{"cached_tokens":25600,"cost_usd":0.0810025,"input_tokens":54505,"output_tokens":234,"requests":3}},"cache_write_tokens":0,"cached_tokens":25600,"cost_usd":0.0810025,"errors":0,"first_request_at":"2026-11-02T12:00:00.000Z","input_tokens":54505,"labels":{"env":"prod","feature":"research"},"last_request_at":"2026-11-02T12:00:07.307Z","models":["gpt-6.1-sol"],"output_tokens":234,"requests":3,"session_id":"research-2c0101b8fa8d"}],"next_cursor":"c2"}"#;
    let fast = page::<WireSession>(body).expect("read directly");
    let slow = parse::<Page<WireSession>>(body.as_bytes()).unwrap();
    assert_eq!(format!("{fast:?}"), format!("{slow:?}"));
    assert_eq!(fast.next_cursor.as_deref(), Some("c2"));
    assert_eq!(fast.data[0].by_model[0].cost_usd, 0.0810025);
}

#[test]
fn what_serde_refuses_or_unescapes_is_left_to_serde() {
    for (text, serde_reads) in [
        // A repeated field: serde's "duplicate field".
        (
            r#"{"data":[{"session_id":"a","session_id":"b","requests":1,"input_tokens":1,"cost_usd":0}]}"#,
            false,
        ),
        // A missing required field.
        (
            r#"{"data":[{"session_id":"a","requests":1,"cost_usd":0}]}"#,
            false,
        ),
        // An escape: serde reads it, unescaped.
        (
            r#"{"data":[{"session_id":"a\u0062","requests":1,"input_tokens":1,"cost_usd":0}]}"#,
            true,
        ),
        // An unknown field is skipped by both.
        (r#"{"data":[],"next_cursor":null,"x":1}"#, true),
        // A page written as an array.
        (r#"["data"]"#, false),
        // Nesting past the reader's depth.
        (
            &format!(r#"{{"data":[],"x":{}0{}}}"#, "[".repeat(40), "]".repeat(40)),
            true,
        ),
    ] {
        let fast = page::<WireSession>(text);
        let slow = parse::<Page<WireSession>>(text.as_bytes());
        assert_eq!(slow.is_ok(), serde_reads, "{text}");
        if serde_reads && text.contains(r#""x":1"#) {
            assert!(fast.is_some(), "{text}");
        } else {
            assert!(fast.is_none(), "{text}");
        }
    }
}
