//! The estimator: OpenAI's counting of tools, the bound's learning, and
//! what survives in the stored samples.

use super::*;
use crate::investigate::ToolSpec;
use crate::investigate::model::{ChatMessage, FunctionTool, ToolChoice};
use serde_json::json;

const A: CallKind = ToolChoice::Auto;
const N: CallKind = ToolChoice::None;

fn request(text: &str) -> ChatRequest {
    ChatRequest {
        model: "m".into(),
        tools: Vec::new(),
        messages: vec![ChatMessage::system("You answer."), ChatMessage::user(text)],
        tool_choice: None,
        max_tokens: 10,
        temperature: None,
    }
}

/// A request of `total` units, measured as 4 bytes a unit.
fn raw(total: u64) -> RawCount {
    with(total, 0)
}

/// A request of `total` units, `results` of them tool results, measured
/// as 4 bytes a unit.
fn with(total: u64, results: u64) -> RawCount {
    RawCount {
        total,
        results,
        bytes: total * 4,
        result_bytes: results * 4,
        ..RawCount::default()
    }
}

#[test]
fn openai_families_get_their_tokenizer_and_others_the_bound() {
    use TokenizerChoice::*;
    assert_eq!(
        Tokenizer::for_model(Auto, "gpt-4o-mini"),
        Some(Tokenizer::O200k)
    );
    assert_eq!(
        Tokenizer::for_model(Auto, "openai/gpt-5"),
        Some(Tokenizer::O200k)
    );
    assert_eq!(
        Tokenizer::for_model(Auto, "o3-mini"),
        Some(Tokenizer::O200k)
    );
    assert_eq!(
        Tokenizer::for_model(Auto, "gpt-4-turbo"),
        Some(Tokenizer::Cl100k)
    );
    assert_eq!(Tokenizer::for_model(Auto, "claude-sonnet-4"), Option::None);
    assert_eq!(Tokenizer::for_model(Auto, "gpt-6-luna"), Option::None);
    assert_eq!(Tokenizer::for_model(Auto, "omni-7b"), Option::None);
    assert_eq!(Tokenizer::for_model(O200kBase, "x"), Some(Tokenizer::O200k));
    assert_eq!(Tokenizer::for_model(None, "gpt-4o"), Option::None);
}

#[test]
fn the_tokenizer_counts_what_the_model_reads() {
    let t = Tokenizer::O200k;
    assert_eq!(t.count("hello world"), 2);
    let e = PromptEstimator::new(Some(t));
    let r = e.raw(&request("hello world"));
    // Two messages of framing and roles, the texts, the reply priming.
    let expected = 2 * TOKENS_PER_MESSAGE
        + t.count("system")
        + t.count("user")
        + t.count("You answer.")
        + 2
        + REPLY_PRIMING_TOKENS;
    assert_eq!(r.total, expected);
    let margin = |n: u64| (n as f64 * (1.0 + TOKENIZER_MARGIN)).ceil() as u64;
    assert_eq!(
        e.estimate(A, r, "r"),
        margin(r.total),
        "nothing learned yet"
    );
    // The provider counted 40 fewer: the difference is learned, whatever
    // the prompt's size.
    e.observe(A, raw(1_000), 960, "r", 1);
    assert_eq!(e.estimate(A, raw(2_000), "r"), margin(1_960));
}

/// The example of OpenAI's guide: a function with a string property and
/// an enum, counted as `num_tokens_for_tools` does for gpt-4o.
#[test]
fn tools_are_counted_as_openais_guide_counts_them() {
    let t = Tokenizer::O200k;
    let tool = FunctionTool::from_spec(&ToolSpec {
        name: "get_current_weather".into(),
        description: "Get the current weather in a given location.".into(),
        input_schema: json!({"type": "object", "properties": {
            "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
            "unit": {"type": "string", "description": "The unit.", "enum": ["celsius", "fahrenheit"]}
        }, "required": ["location"]}),
    });
    let expected = 7
        + t.count("get_current_weather:Get the current weather in a given location")
        + 3
        + 3
        + t.count("location:string:The city and state, e.g. San Francisco, CA")
        + 3
        + t.count("unit:string:The unit")
        + 3
        + t.count("celsius")
        + 3
        + t.count("fahrenheit")
        + 12
        - 3;
    assert_eq!(t.tools_tokens(std::slice::from_ref(&tool)), expected);
    // Much less than the JSON the request carries.
    let json = serde_json::to_string(&[&tool]).unwrap();
    assert!(
        expected < t.count(&json),
        "{expected} vs {}",
        t.count(&json)
    );
    // gpt-4 and gpt-3.5 open each function with 10.
    let c = Tokenizer::Cl100k;
    assert_eq!(
        c.tools_tokens(&[tool.clone(), tool.clone()]),
        2 * (c.tools_tokens(std::slice::from_ref(&tool)) - 12) + 12
    );
    assert_eq!(t.tools_tokens(&[]), 0);
}

#[test]
fn the_bound_starts_at_its_prior_and_learns_the_rate_of_pieces() {
    let e = PromptEstimator::new(None);
    assert_eq!(e.method(), BOUND_METHOD);
    let prior = (1_000.0 * PRIOR_TOKENS_PER_PIECE).ceil() as u64;
    assert_eq!(e.estimate(A, raw(1_000), "r"), prior);
    e.observe(A, raw(1_000), 1_100, "r", 1);
    // The run goes on: the count plus the pieces added at 1.1 a piece.
    let next = e.estimate(A, raw(1_100), "r");
    assert!((1_210..=1_210 * 108 / 100).contains(&next), "{next}");
    // Another run of the same size starts from that count.
    let other = e.estimate(A, raw(1_000), "other");
    assert!((1_100..=1_100 * 108 / 100).contains(&other), "{other}");
}

/// llama-cpp-python's function-calling template leaves tool results out of
/// the prompt and the tools out of an answer: once a run showed both, the
/// next run's estimates follow.
#[test]
fn the_bound_learns_what_a_template_leaves_out() {
    let e = PromptEstimator::new(None);
    // Run 1: a call, a tool result of 800 pieces that adds no token, and
    // an answer without the 300 tokens of tools.
    e.observe(A, with(1_000, 0), 1_000, "r1", 1);
    e.observe(A, with(1_850, 800), 1_050, "r1", 2);
    e.observe(N, with(1_900, 800), 800, "r1", 3);
    // Run 2, the same shapes.
    let first = e.estimate(A, with(1_020, 0), "r2");
    assert!((1_020..=1_020 * 110 / 100).contains(&first), "{first}");
    e.observe(A, with(1_020, 0), 1_020, "r2", 4);
    let second = e.estimate(A, with(1_870, 800), "r2");
    assert!((1_070..=1_070 * 110 / 100).contains(&second), "{second}");
    e.observe(A, with(1_870, 800), 1_070, "r2", 5);
    let answer = e.estimate(N, with(1_920, 800), "r2");
    assert!((820..=820 * 110 / 100).contains(&answer), "{answer}");
}

#[test]
fn what_was_learned_survives_in_the_samples() {
    let e = PromptEstimator::new(None);
    assert!(!e.unsaved());
    e.observe(A, raw(1_000), 1_100, "r", 1);
    assert!(e.unsaved());
    let stored = e.samples();
    e.saved();
    assert!(!e.unsaved());
    // A new process loads them and estimates as the old one did.
    let restarted = PromptEstimator::new(None);
    restarted.merge(stored.clone());
    assert_eq!(
        restarted.estimate(A, raw(900), "next"),
        e.estimate(A, raw(900), "next")
    );
    assert!(!restarted.unsaved(), "loading is not learning");
    // Merging the same samples again changes nothing; the window is
    // bounded and keeps the latest.
    restarted.merge(stored);
    assert_eq!(restarted.samples().len(), 1);
    for i in 0..(CALIBRATION_WINDOW as i64 + 5) {
        restarted.observe(A, raw(1_000), 1_000, &format!("r{i}"), 10 + i);
    }
    let kept = restarted.samples();
    assert_eq!(kept.len(), CALIBRATION_WINDOW);
    assert_eq!(
        kept.last().map(|s| s.at_ms),
        Some(10 + CALIBRATION_WINDOW as i64 + 4)
    );
    // A sample round-trips through its stored JSON.
    let text = serde_json::to_string(&kept).unwrap();
    let back: Vec<Sample> = serde_json::from_str(&text).unwrap();
    assert_eq!(back, kept);
}

/// Counts by the server's tokenizer: the template's own text is learned
/// as a difference per kind of call, the tool results it leaves out as a
/// share.
#[test]
fn server_counts_learn_the_template_per_kind_and_the_share_of_results() {
    let e = PromptEstimator::server();
    assert_eq!(e.method(), SERVER_METHOD);
    let tokens = |total: u64, results: u64| RawCount {
        total,
        results,
        ..RawCount::default()
    };
    let margin = |n: u64| (n as f64 * (1.0 + TOKENIZER_MARGIN)).ceil() as u64;
    // Before any report: the prior.
    assert_eq!(
        e.estimate(A, tokens(1_000, 0), "r1"),
        (1_000.0 * PRIOR_TOKENS_PER_TOKEN).ceil() as u64
    );
    // Run 1: the template adds 128 tokens to a call with tools, leaves the
    // 50 tokens of results out, and an answer drops the tools (-400).
    e.observe(A, tokens(1_000, 0), 1_128, "r1", 1);
    assert_eq!(
        e.estimate(N, tokens(1_100, 0), "r1"),
        margin(1_228),
        "before an answer was seen, as a call with tools"
    );
    e.observe(A, tokens(1_200, 50), 1_278, "r1", 2);
    e.observe(N, tokens(1_300, 100), 800, "r1", 3);
    // Run 2: exact, plus the margin, whatever its size and results.
    assert_eq!(e.estimate(A, tokens(1_100, 0), "r2"), margin(1_228));
    assert_eq!(e.estimate(A, tokens(1_500, 200), "r2"), margin(1_428));
    assert_eq!(e.estimate(N, tokens(1_400, 150), "r2"), margin(850));
    // A count the server could not give is estimated at the pieces' prior
    // and not learned from.
    let failed = RawCount {
        total: 500,
        fallback: true,
        ..RawCount::default()
    };
    assert_eq!(
        e.estimate(A, failed, "r2"),
        (500.0 * PRIOR_TOKENS_PER_PIECE).ceil() as u64
    );
    e.observe(A, failed, 10, "r2", 4);
    assert_eq!(e.samples().len(), 3);
}

#[test]
fn message_text_is_escaped_as_jinjas_autoescape_renders_it() {
    assert_eq!(
        server::html_escaped(r#"{"a": "<b> & 'c'"}"#),
        "{&#34;a&#34;: &#34;&lt;b&gt; &amp; &#39;c&#39;&#34;}"
    );
    assert_eq!(server::html_escaped("plain"), "plain");
}

/// A tokenize endpoint on loopback that counts words and keeps what it
/// was asked.
async fn word_counter(status: u16) -> (url::Url, std::sync::Arc<Mutex<Vec<String>>>) {
    use axum::{Json, Router, routing::post};
    let asked = std::sync::Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = asked.clone();
    let app = Router::new().route(
        "/extras/tokenize/count",
        post(move |Json(body): Json<serde_json::Value>| {
            let seen = seen.clone();
            async move {
                let input = body["input"].as_str().unwrap_or_default().to_owned();
                let n = input.split_whitespace().count();
                seen.lock().unwrap().push(input);
                (
                    axum::http::StatusCode::from_u16(status).unwrap(),
                    Json(json!({ "count": n })),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let url = url::Url::parse(&format!("http://{addr}/v1")).unwrap();
    (url, asked)
}

fn model_client(url: url::Url) -> crate::investigate::model::ModelClient {
    crate::investigate::model::ModelClient::new(
        url,
        &crate::secret::Secret::new("k"),
        "m",
        crate::source::HttpLimits {
            timeout: std::time::Duration::from_secs(5),
            connect_timeout: std::time::Duration::from_secs(5),
            max_retries: 0,
            retry_base: std::time::Duration::from_millis(10),
            retry_max: std::time::Duration::from_millis(10),
            max_body_bytes: 1 << 20,
        },
    )
    .unwrap()
}

#[tokio::test]
async fn the_server_counts_each_text_once_as_the_template_renders_it() {
    let (url, asked) = word_counter(200).await;
    let endpoint = default_tokenize_url(&url).unwrap();
    assert_eq!(endpoint.path(), DEFAULT_TOKENIZE_PATH);
    let client = model_client(url).with_tokenize_url(endpoint, true);
    assert_eq!(client.estimator().method(), SERVER_METHOD);
    let mut req = request("say \"hi\" to three");
    req.messages.push(ChatMessage::tool("call_1", "one two"));
    let raw = client.raw_count(&req).await;
    // Words: "You answer." 2, the escaped user text 4, the result 2; and
    // the framing of three messages.
    assert!(!raw.fallback);
    assert_eq!(raw.total, 2 + 4 + 2 + 3 * pieces::PIECES_PER_MESSAGE);
    assert_eq!((raw.results, raw.tools), (2, 0));
    assert!(
        asked
            .lock()
            .unwrap()
            .iter()
            .any(|t| t == "say &#34;hi&#34; to three"),
        "{:?}",
        asked.lock().unwrap()
    );
    // The same texts again: nothing asked.
    let before = asked.lock().unwrap().len();
    assert_eq!(client.raw_count(&req).await, raw);
    assert_eq!(asked.lock().unwrap().len(), before);
}

#[tokio::test]
async fn a_failed_count_falls_back_to_the_prior() {
    let (url, _) = word_counter(500).await;
    let endpoint = default_tokenize_url(&url).unwrap();
    let client = model_client(url).with_tokenize_url(endpoint, false);
    let req = request("anything at all");
    let raw = client.raw_count(&req).await;
    assert!(raw.fallback);
    assert_eq!(raw.total, pieces::count_request(&req).total);
    assert_eq!(
        client.estimator().estimate(A, raw, "r"),
        (raw.total as f64 * PRIOR_TOKENS_PER_PIECE).ceil() as u64
    );
}
