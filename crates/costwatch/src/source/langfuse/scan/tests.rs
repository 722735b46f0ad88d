//! The one-pass reader of observation pages against serde's, on pages
//! generated to cover the shape Langfuse writes and every way out of it,
//! and on the same pages corrupted byte by byte. Whenever the reader
//! gives a page, serde must give the same one; whenever a page is plain,
//! the reader must give it.

use super::super::wire::Page;
use super::page;
use crate::source::json::scanner::testing::{ANY, Gen, Pool, Tally, corrupted, generated};

const OPT_TEXT: Pool = Pool {
    plain: &[
        "null",
        "\"\"",
        "\"GENERATION\"",
        "\"support-agent-47bd564ff9a1\"",
        "\"ünï 🙂\"",
        "\"a\\\"b \\u00e9\"",
    ],
    other: &[
        "7",
        "[]",
        "{}",
        "true",
        "\"\\ud800\"",
        "\"bad\\q\"",
        "\"\\ud83d\\ude42\"",
    ],
};
const TIME: Pool = Pool {
    plain: &[
        "null",
        "\"2026-10-11T11:24:03.120Z\"",
        "\"2026-10-11T11:24:03Z\"",
        "\"2026-10-11T13:24:03.120+02:00\"",
        "\"2026-10-11T11:24:03.120+00:00\"",
    ],
    other: &[
        "\"noon\"",
        "5",
        "\"2026-02-30T00:00:00Z\"",
        "\"2026-10-11 11:24:03\"",
    ],
};
const NUMBER: Pool = Pool {
    plain: &[
        "0",
        "1200",
        "-3",
        "1.5",
        "-0",
        "2e3",
        "18446744073709551616",
    ],
    other: &["null", "\"5\"", "true", "1e400", "01"],
};
const COST: Pool = Pool {
    plain: &[
        "0",
        "0.00070358",
        "12",
        "-0.25",
        "1e-3",
        "0.30000000000000004",
    ],
    other: &["null", "\"0.1\"", "1e400", ".5"],
};
const OPT_COST: Pool = Pool {
    plain: &["null", "0.0123", "3"],
    other: &["\"0.1\"", "[]"],
};
const SCALAR: Pool = Pool {
    plain: &[
        "\"prod\"",
        "\"\"",
        "0",
        "1.2",
        "true",
        "null",
        "[\"x\"]",
        "{\"nested\": {\"deeper\": [1, 2]}}",
    ],
    other: &["\"\\udc00\"", "1e999"],
};
const TAGS: Pool = Pool {
    plain: &["null", "[]", "[\"env:prod\", \"a\\\"b\"]"],
    other: &["[1]", "\"tag\"", "[\"a\",]", "{}"],
};

impl Gen {
    /// `usageDetails` or `costDetails`: keys perhaps given twice.
    fn langfuse_details(&mut self, values: &Pool) -> String {
        let mut fields = Vec::new();
        for _ in 0..self.rng.below(6) {
            let key = self.rng.pick(&[
                "input",
                "output",
                "total",
                "input_cached_tokens",
                "cache_read_input_tokens",
                "input_cache_creation",
            ]);
            let v = self.value(values, 2);
            fields.push((key.to_owned(), v));
        }
        self.object(fields, false)
    }

    /// `metadata`: an object of any entries, or another value.
    fn langfuse_metadata(&mut self) -> String {
        if self.rng.chance(15) {
            return self.value(&SCALAR, 0);
        }
        let mut fields = Vec::new();
        for _ in 0..self.rng.below(5) {
            let key = self.rng.pick(&["feature", "env", "ls_provider", "a"]);
            let v = self.value(&SCALAR, 2);
            fields.push((key.to_owned(), v));
        }
        self.object(fields, false)
    }

    /// One observation.
    fn langfuse_observation(&mut self) -> String {
        let mut fields = self.fields(&[
            ("id", &OPT_TEXT, false),
            ("traceId", &OPT_TEXT, false),
            ("startTime", &TIME, false),
            ("type", &OPT_TEXT, false),
            ("name", &OPT_TEXT, false),
            ("level", &OPT_TEXT, false),
            ("statusMessage", &OPT_TEXT, false),
            ("version", &OPT_TEXT, false),
            ("environment", &OPT_TEXT, false),
            ("userId", &OPT_TEXT, false),
            ("sessionId", &OPT_TEXT, false),
            ("model", &OPT_TEXT, false),
            ("providedModelName", &OPT_TEXT, false),
            ("totalCost", &OPT_COST, false),
            ("traceName", &OPT_TEXT, false),
            ("tags", &TAGS, false),
            ("release", &OPT_TEXT, false),
        ]);
        for key in ["metadata", "usageDetails", "costDetails"] {
            if !self.rng.chance(80) {
                continue;
            }
            let v = match key {
                _ if self.rng.chance(5) => "null".to_owned(),
                "metadata" => self.langfuse_metadata(),
                "usageDetails" => self.langfuse_details(&NUMBER),
                _ => self.langfuse_details(&COST),
            };
            fields.push((key.to_owned(), v));
        }
        self.object(fields, true)
    }

    /// A page of observations.
    fn langfuse_page(&mut self) -> String {
        let rows: Vec<String> = (0..self.rng.below(5))
            .map(|_| self.langfuse_observation())
            .collect();
        let mut fields = Vec::new();
        if !self.rng.chance(3) {
            fields.push(("data".to_owned(), format!("[{}]", rows.join(","))));
        }
        match self.rng.below(4) {
            0 => {}
            1 => fields.push(("meta".to_owned(), "null".to_owned())),
            _ => {
                let cursor = self.value(&OPT_TEXT, 3);
                let mut meta = vec![("cursor".to_owned(), cursor)];
                if self.rng.chance(20) {
                    let v = self.value(&ANY, 10);
                    meta.push(("totalItems".to_owned(), v));
                }
                let m = self.object(meta, false);
                fields.push(("meta".to_owned(), m));
            }
        }
        let out = self.object(fields, true);
        self.end_page(out)
    }
}

/// Checks the reader against serde on `text`.
fn agree(text: &str, plain: bool, tally: &mut Tally) {
    let fast = page(text).map(|p| format!("{p:?}"));
    let slow = serde_json::from_str::<Page<'_>>(text)
        .map(|p| format!("{p:?}"))
        .map_err(|e| e.to_string());
    tally.agree(text, plain, fast, slow);
}

#[test]
fn generated_observation_pages_read_as_serde_reads_them() {
    let tally = generated(6000, Gen::langfuse_page, agree);
    // The generator reaches all three outcomes, each often.
    tally.assert_at_least(1000, 100, 100);
}

#[test]
fn corrupted_observation_pages_read_as_serde_reads_them() {
    let tally = corrupted(Gen::langfuse_page, |text, tally| agree(text, false, tally));
    tally.assert_at_least(1000, 0, 5000);
}

#[test]
fn a_served_page_is_read_directly() {
    let text = r#"{"data":[{"id":"obs-1","traceId":"t-1","startTime":"2026-06-03T00:10:51.037Z","endTime":"2026-06-03T00:10:53.622Z","type":"GENERATION","name":"chat","level":"DEFAULT","statusMessage":null,"version":null,"environment":"default","userId":"u","sessionId":"long-chat-5438","metadata":{"feature":"long-chat","env":"prod"},"model":"gpt-6-luna","providedModelName":"gpt-6-luna","usageDetails":{"input":3927,"input_cached_tokens":16128,"output":374,"total":20429},"costDetails":{"input":0.0005,"output":0.0002,"total":0.0007},"totalCost":0.0007,"latency":2.585,"traceName":"agent","tags":["env:prod"],"release":null}],"meta":{"cursor":"c2"}}"#;
    let mut tally = Tally::default();
    agree(text, true, &mut tally);
    let p = page(text).expect("read directly");
    assert_eq!(p.data.map(|d| d.len()), Some(1));
    assert_eq!(p.meta.and_then(|m| m.cursor).as_deref(), Some("c2"));
}
