//! The direct reader against serde, on pages generated to cover the plain
//! shape and every way out of it, and on the same pages corrupted byte by
//! byte. Whenever the reader gives a page, serde must give the same one;
//! whenever a page is plain, the reader must give it.

use super::super::{Page, WireRequest, WireSession, parse};
use super::{Scan, page};
use serde::de::DeserializeOwned;
use std::fmt::Debug;

/// xorshift64*: deterministic, so a failure names a reproducible page.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

/// Text being built, and whether it is still in the plain shape.
struct Gen {
    rng: Rng,
    plain: bool,
}

/// Values of each kind: plain ones the reader reads, then the rest.
struct Pool {
    plain: &'static [&'static str],
    other: &'static [&'static str],
}

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
/// Values of unknown fields: the reader skips the plain ones.
const ANY: Pool = Pool {
    plain: &[
        "null",
        "true",
        "false",
        "0",
        "-1.5e-7",
        "\"x\"",
        "[]",
        "{}",
        "[1,[2,[3]],{\"a\":null}]",
        "{\"x\":{\"y\":[true,false,\"z\"]}}",
    ],
    other: &[
        "\"esc\\\"aped\"",
        "[1,]",
        "{\"a\"}",
        "nul",
        "tru",
        "01",
        "1.e5",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
    ],
};

impl Gen {
    fn new(seed: u64) -> Gen {
        Gen {
            rng: Rng(seed | 1),
            plain: true,
        }
    }

    /// Whitespace JSON allows between tokens.
    fn ws(&mut self) -> &'static str {
        if self.rng.chance(85) {
            ""
        } else {
            self.rng.pick(&[" ", "\n", "\t", " \r\n  "])
        }
    }

    /// A value from `pool`, rarely one outside the plain shape.
    fn value(&mut self, pool: &Pool, odd_percent: u64) -> String {
        if self.rng.chance(odd_percent) {
            self.plain = false;
            self.rng.pick(pool.other).to_owned()
        } else {
            self.rng.pick(pool.plain).to_owned()
        }
    }

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

    /// An object of `fields`, shuffled, perhaps with an unknown field (in
    /// a struct, not in a map such as `by_model`).
    fn object(&mut self, mut fields: Vec<(String, String)>, is_struct: bool) -> String {
        for i in (1..fields.len()).rev() {
            fields.swap(i, self.rng.below(i + 1));
        }
        if is_struct && self.rng.chance(10) {
            let v = self.value(&ANY, 15);
            let at = self.rng.below(fields.len() + 1);
            fields.insert(at, ("surprise".to_owned(), v));
        }
        let mut out = format!("{}{{", self.ws());
        for (i, (k, v)) in fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let (a, b, c) = (self.ws(), self.ws(), self.ws());
            out.push_str(&format!("{a}\"{k}\"{b}:{c}{v}"));
        }
        out.push_str(self.ws());
        out.push('}');
        out
    }

    /// The fields of a row: each required one present, or rarely missing
    /// (no longer plain), each optional one perhaps, rarely one twice.
    fn fields(&mut self, spec: &[(&str, &Pool, bool)]) -> Vec<(String, String)> {
        let mut fields = Vec::new();
        for (key, pool, required) in spec {
            let present = if *required {
                let keep = !self.rng.chance(1);
                self.plain &= keep;
                keep
            } else {
                self.rng.chance(70)
            };
            if present {
                let v = self.value(pool, 1);
                fields.push(((*key).to_owned(), v));
            }
        }
        if !fields.is_empty() && self.rng.chance(1) {
            self.plain = false;
            let again = fields[self.rng.below(fields.len())].clone();
            fields.push(again);
        }
        fields
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
        let mut out = self.object(fields, true);
        if self.rng.chance(2) {
            self.plain = false;
            out.push_str(self.rng.pick(&["x", "{}", ",", "]"]));
        }
        out
    }
}

/// What happened to one text.
#[derive(Default)]
struct Tally {
    read: usize,
    stepped_aside: usize,
    refused: usize,
}

/// Checks the reader against serde on `text`; `plain` says the reader must
/// read it.
fn agree<T: Scan + DeserializeOwned + Debug>(text: &str, plain: bool, tally: &mut Tally) {
    let fast = page::<T>(text);
    let slow = parse::<Page<T>>(text.as_bytes());
    match (&fast, &slow) {
        (Some(f), Ok(s)) => {
            assert_eq!(
                format!("{f:?}"),
                format!("{s:?}"),
                "the two readers differ on {text}"
            );
            tally.read += 1;
        }
        (Some(_), Err(e)) => panic!("the reader read a page serde refuses ({e}): {text}"),
        (None, Ok(_)) => tally.stepped_aside += 1,
        (None, Err(_)) => tally.refused += 1,
    }
    if plain {
        assert!(fast.is_some(), "a plain page was not read: {text}");
    }
}

fn generated<T: Scan + DeserializeOwned + Debug>(row: fn(&mut Gen) -> String) -> Tally {
    let mut tally = Tally::default();
    for seed in 1..=4000u64 {
        let mut g = Gen::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let text = g.page(row);
        agree::<T>(&text, g.plain, &mut tally);
    }
    tally
}

#[test]
fn generated_session_pages_read_as_serde_reads_them() {
    let t = generated::<WireSession>(Gen::session);
    // The generator reaches all three outcomes, each often.
    assert!(t.read > 1000, "read {}", t.read);
    assert!(t.stepped_aside > 100, "stepped aside {}", t.stepped_aside);
    assert!(t.refused > 100, "refused {}", t.refused);
}

#[test]
fn generated_request_pages_read_as_serde_reads_them() {
    let t = generated::<WireRequest>(Gen::request);
    assert!(t.read > 1000, "read {}", t.read);
    assert!(t.stepped_aside > 50, "stepped aside {}", t.stepped_aside);
    assert!(t.refused > 100, "refused {}", t.refused);
}

/// Plain pages with one byte deleted, inserted, replaced, or the text cut:
/// whatever the reader still reads, serde reads the same.
fn corrupted<T: Scan + DeserializeOwned + Debug>(row: fn(&mut Gen) -> String) -> Tally {
    const BYTES: &[u8] = b"{}[]\":,0123456789.-+eEnulltrfas \\\n";
    let mut tally = Tally::default();
    let mut rng = Rng(0x5EED);
    let mut seed = 0u64;
    while tally.read + tally.stepped_aside + tally.refused < 20_000 {
        seed += 1;
        let mut g = Gen::new(seed.wrapping_mul(0xD1B5_4A32_D192_ED03));
        let text = g.page(row);
        if !g.plain || !text.is_ascii() {
            continue;
        }
        for _ in 0..10 {
            let mut b = text.clone().into_bytes();
            let at = rng.below(b.len());
            let byte = BYTES[rng.below(BYTES.len())];
            match rng.below(4) {
                0 => {
                    b.remove(at);
                }
                1 => b.insert(at, byte),
                2 => b[at] = byte,
                _ => b.truncate(at),
            }
            let Ok(bad) = String::from_utf8(b) else {
                continue;
            };
            agree::<T>(&bad, false, &mut tally);
        }
    }
    tally
}

#[test]
fn corrupted_session_pages_read_as_serde_reads_them() {
    let t = corrupted::<WireSession>(Gen::session);
    assert!(t.read > 1000, "read {}", t.read);
    assert!(t.refused > 5000, "refused {}", t.refused);
}

#[test]
fn corrupted_request_pages_read_as_serde_reads_them() {
    let t = corrupted::<WireRequest>(Gen::request);
    assert!(t.read > 1000, "read {}", t.read);
    assert!(t.refused > 5000, "refused {}", t.refused);
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
        let mut s = super::Scanner { text: t, at: 0 };
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
