//! The one-pass reader of spend-log pages against serde's, on pages
//! generated to cover the shape LiteLLM writes and every way out of it,
//! and on the same pages corrupted byte by byte. Whenever the reader
//! gives a page, serde must give the same one; whenever a page is plain,
//! the reader must give it.

use super::super::wire::Envelope;
use super::page;
use crate::source::json::scanner::testing::{ANY, Gen, Pool, Tally, corrupted, generated};

const TEXT: Pool = Pool {
    plain: &[
        "\"a\"",
        "\"chatcmpl-5b075e39-af5a-464f-a3fb-d83f117e7240\"",
        "\"\"",
        "\"ünï 🙂\"",
        "\"a\\\"b\"",
        "\"tab\\t and \\\\ and \\/\"",
        "\"\\u00e9t\\u00E9\"",
    ],
    other: &[
        "\"bad\\q\"",
        "\"raw\u{1}\"",
        "\"\\ud83d\\ude42\"",
        "7",
        "null",
        "[]",
    ],
};
const OPT_TEXT: Pool = Pool {
    plain: &[
        "null",
        "\"\"",
        "\"openai\"",
        "\"long-chat-5438d79bcbdd\"",
        "\"x\\ny\"",
    ],
    other: &["7", "[]", "{}", "true", "\"\\ud800\""],
};
const COUNT: Pool = Pool {
    plain: &["0", "1", "374", "20055", "9223372036854775807"],
    other: &[
        "-1",
        "9223372036854775808",
        "1.0",
        "1e2",
        "\"5\"",
        "null",
        "01",
    ],
};
const SPEND: Pool = Pool {
    plain: &[
        "0",
        "0.00070358",
        "0.0008136",
        "12",
        "-0.25",
        "1e-3",
        "0.30000000000000004",
        "123456789012345678901234567890",
    ],
    other: &["null", "\"0.1\"", "1e400", ".5", "1."],
};
const TIME: Pool = Pool {
    plain: &[
        "\"2026-06-03T00:10:51.037+00:00\"",
        "\"2026-06-03T00:10:51.037Z\"",
        "\"2026-06-03T00:10:51+00:00\"",
        "\"2026-10-11T13:24:03.120+02:00\"",
        "\"2026-10-11T11:24:03.120000\"",
        "\"2026-10-11 11:24:03.120\"",
        "\"2026-06-03T00:10:51.037\\u002B00:00\"",
    ],
    other: &[
        "\"noon\"",
        "null",
        "5",
        "\"2026-02-30T00:00:00+00:00\"",
        "\"2026-06-03T24:00:00+00:00\"",
    ],
};
const TAGS: Pool = Pool {
    plain: &[
        "null",
        "[]",
        "[\"env:prod\", 3, {\"a\": [1]}, [\"n\"], \"feature:chat\"]",
        "\"[\\\"env:prod\\\", \\\"feature:long-chat\\\"]\"",
        "\"not a list\"",
        "{\"a\": 1}",
        "true",
        "5",
    ],
    other: &["[1,]", "[\"\\ud83d\"]", "1e400"],
};
/// The values a usage object's counts take: what the check refuses by
/// name is still read.
const USAGE_COUNT: Pool = Pool {
    plain: &["0", "16128", "null", "-3", "\"x\"", "1.5", "-0"],
    other: &["true", "[]", "{}"],
};
const SCALAR: Pool = Pool {
    plain: &[
        "\"prod\"",
        "\"\"",
        "\"a\\\"b\"",
        "0",
        "1.2",
        "-7",
        "true",
        "false",
        "null",
        "[\"x\"]",
        "{\"nested\": {\"deeper\": [1, 2]}}",
        "18446744073709551616",
    ],
    other: &["\"\\udc00\"", "1e999"],
};
const PAGE_NUMBER: Pool = Pool {
    plain: &["1", "7", "null"],
    other: &["\"1\"", "-1", "1.5"],
};

impl Gen {
    /// An object of scalar entries (`spend_logs_metadata`), keys perhaps
    /// given twice.
    fn entries(&mut self) -> String {
        let mut fields = Vec::new();
        for _ in 0..self.rng.below(5) {
            let key = if self.rng.chance(2) {
                // A key with an escape is left to serde.
                self.plain = false;
                "k\\u0065y"
            } else {
                self.rng.pick(&["env", "feature", "case", "a"])
            };
            let v = self.value(&SCALAR, 2);
            fields.push((key.to_owned(), v));
        }
        self.object(fields, false)
    }

    /// `error_information`.
    fn error_information(&mut self) -> String {
        let mut fields = Vec::new();
        for key in ["error_class", "error_code", "traceback", "llm_provider"] {
            if self.rng.chance(70) {
                let v = self.value(&SCALAR, 2);
                fields.push((key.to_owned(), v));
            }
        }
        self.object(fields, false)
    }

    /// A usage object (`additional_usage_values`, `usage_object`).
    fn usage_values(&mut self) -> String {
        let mut fields = Vec::new();
        for key in [
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
            "prompt_tokens",
        ] {
            if self.rng.chance(60) {
                let v = self.value(&USAGE_COUNT, 2);
                fields.push((key.to_owned(), v));
            }
        }
        if self.rng.chance(60) {
            let mut details = Vec::new();
            for key in [
                "cached_tokens",
                "cache_creation_tokens",
                "cache_write_tokens",
                "audio_tokens",
            ] {
                if self.rng.chance(60) {
                    let v = self.value(&USAGE_COUNT, 2);
                    details.push((key.to_owned(), v));
                }
            }
            let d = if self.rng.chance(10) {
                self.value(&SCALAR, 0)
            } else {
                self.object(details, false)
            };
            fields.push(("prompt_tokens_details".to_owned(), d));
        }
        self.object(fields, false)
    }

    /// `metadata`: an object of LiteLLM's keys (each perhaps of another
    /// kind, or given twice), its JSON text, or another value.
    fn metadata(&mut self) -> String {
        match self.rng.below(20) {
            0 => return "null".to_owned(),
            1 => {
                return "\"{\\\"spend_logs_metadata\\\": {\\\"feature\\\": \\\"chat\\\"}}\""
                    .to_owned();
            }
            2 => return self.rng.pick(&["[1]", "5", "true", "\"oops\""]).to_owned(),
            _ => {}
        }
        let mut fields = Vec::new();
        for key in [
            "spend_logs_metadata",
            "error_information",
            "additional_usage_values",
            "usage_object",
            "user_api_key_alias",
            "attempted_retries",
            "applied_guardrails",
        ] {
            if !self.rng.chance(75) {
                continue;
            }
            let v = match key {
                _ if self.rng.chance(5) => self.value(&SCALAR, 0),
                "spend_logs_metadata" => self.entries(),
                "error_information" => self.error_information(),
                "additional_usage_values" | "usage_object" => self.usage_values(),
                _ => self.value(&SCALAR, 2),
            };
            fields.push((key.to_owned(), v));
            if self.rng.chance(3) {
                let again = self.value(&SCALAR, 0);
                fields.push((key.to_owned(), again));
            }
        }
        if self.rng.chance(20) {
            let v = self.value(&ANY, 10);
            fields.push(("surprise".to_owned(), v));
        }
        self.object(fields, false)
    }

    /// One spend-log row.
    fn spend_log(&mut self) -> String {
        let mut fields = self.fields(&[
            ("request_id", &TEXT, true),
            ("startTime", &TIME, true),
            ("spend", &SPEND, true),
            ("prompt_tokens", &COUNT, true),
            ("completion_tokens", &COUNT, true),
            ("model", &TEXT, true),
            ("model_group", &OPT_TEXT, false),
            ("model_id", &OPT_TEXT, false),
            ("call_type", &OPT_TEXT, false),
            ("session_id", &OPT_TEXT, false),
            ("status", &OPT_TEXT, false),
            ("end_user", &OPT_TEXT, false),
            ("team_id", &OPT_TEXT, false),
            ("user", &OPT_TEXT, false),
            ("organization_id", &OPT_TEXT, false),
            ("custom_llm_provider", &OPT_TEXT, false),
            ("litellm_call_id", &OPT_TEXT, false),
            ("request_tags", &TAGS, false),
        ]);
        if self.rng.chance(90) {
            let m = self.metadata();
            fields.push(("metadata".to_owned(), m));
        }
        self.object(fields, true)
    }

    /// A page of rows.
    fn spend_logs(&mut self) -> String {
        let rows: Vec<String> = (0..self.rng.below(5)).map(|_| self.spend_log()).collect();
        let mut fields = vec![("data".to_owned(), format!("[{}]", rows.join(",")))];
        for key in ["page", "page_size"] {
            if self.rng.chance(70) {
                let v = self.value(&PAGE_NUMBER, 3);
                fields.push((key.to_owned(), v));
            }
        }
        fields.push(("total_is_capped".to_owned(), "false".to_owned()));
        let out = self.object(fields, true);
        self.end_page(out)
    }
}

/// Checks the reader against serde on `text`.
fn agree(text: &str, plain: bool, tally: &mut Tally) {
    let fast = page(text).map(|p| format!("{p:?}"));
    let slow = serde_json::from_str::<Envelope<'_>>(text)
        .map(|p| format!("{p:?}"))
        .map_err(|e| e.to_string());
    tally.agree(text, plain, fast, slow);
}

#[test]
fn generated_spend_log_pages_read_as_serde_reads_them() {
    let tally = generated(6000, Gen::spend_logs, agree);
    // The generator reaches all three outcomes, each often.
    tally.assert_at_least(1000, 100, 100);
}

#[test]
fn corrupted_spend_log_pages_read_as_serde_reads_them() {
    let tally = corrupted(Gen::spend_logs, |text, tally| agree(text, false, tally));
    tally.assert_at_least(1000, 0, 5000);
}

#[test]
fn a_served_page_is_read_directly_and_borrows_its_strings() {
    let text = r#"{"data":[{"agent_id":null,"api_key":"88dc","cache_hit":"False","call_type":"acompletion","completion_tokens":374,"custom_llm_provider":"openai","end_user":"","litellm_call_id":"e420","metadata":{"additional_usage_values":{"cache_creation_input_tokens":3927,"cache_read_input_tokens":16128,"prompt_tokens_details":{"audio_tokens":0,"cache_write_tokens":3927,"cached_tokens":16128}},"applied_guardrails":[],"attempted_retries":0,"error_information":{"error_class":"","error_code":"","traceback":""},"litellm_overhead_time_ms":1.2,"spend_logs_metadata":{"env":"prod","feature":"long-chat"},"usage_object":{"prompt_tokens":20055,"prompt_tokens_details":{"cached_tokens":16128}},"user_api_key_alias":"sim-agents"},"model":"gpt-6-luna-2026-08-01","model_group":"gpt-6-luna","model_id":"8c0e","organization_id":"","prompt_tokens":20055,"request_id":"chatcmpl-5b07","request_tags":"[\"env:prod\", \"feature:long-chat\"]","session_id":"long-chat-5438","spend":0.00070358,"startTime":"2026-06-03T00:10:51.037+00:00","status":"success","team_id":"","user":"default_user_id"}],"page":1,"page_size":500,"total":10000,"total_is_capped":true,"total_pages":20}"#;
    let mut tally = Tally::default();
    agree(text, true, &mut tally);
    let p = page(text).expect("read directly");
    assert_eq!(p.data.len(), 1);
    assert!(matches!(
        p.data[0].request_id.0,
        std::borrow::Cow::Borrowed(_)
    ));
    assert_eq!(p.page_size, Some(500));
}

#[test]
fn tags_given_as_text_read_as_serde_reads_them() {
    for text in [
        r#"["env:prod", "feature:long-chat"]"#,
        r#" [ "a" , 3, {"b": ["c"]}, ["d"], null, "e\"f" ] "#,
        "[]",
        r#"["\ud83d\ude42"]"#,
        r#"["a",]"#,
        r#"["a"] x"#,
        "null",
        r#""a""#,
        "{}",
    ] {
        let serde = serde_json::from_str::<Option<crate::source::json::Strings<'_>>>(text)
            .ok()
            .map(|l| l.map(|l| l.0).unwrap_or_default());
        match super::tags_text(text) {
            Some(list) => assert_eq!(Some(list), serde, "{text}"),
            None => assert!(
                !text.trim_start().starts_with('[') || serde.is_none() || text.contains("\\ud8"),
                "a list serde reads was left to it: {text}"
            ),
        }
    }
}
