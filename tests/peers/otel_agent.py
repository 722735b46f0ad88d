"""A scripted LLM agent instrumented with OpenTelemetry, for costwatch's OTLP
interop tests.

It is a real client, put together the way an application would: the real
``openai`` client (2.54.0), traced by the official OpenAI GenAI
instrumentation (``opentelemetry-instrumentation-openai-v2`` 2.4b0, with
``opentelemetry-util-genai`` 1.1b0), through the OpenTelemetry Python SDK
(1.45.2) and its OTLP/HTTP protobuf span exporter. ``.ci/otel-peer.sh``
installs them.

    python otel_agent.py --scenario scenario.json \\
        [--endpoint http://127.0.0.1:PORT/v1/traces] [--token-file F] \\
        [--gzip] [--json-out F]

The scenario (the format the Rust tests write)::

    {"sessions": [{"session_id": "s1", "service": "support-agent",
                   "conversation": true,
                   "calls": [{"model": "gpt-6-luna", "input_tokens": 4092,
                              "cached_tokens": 0, "output_tokens": 215,
                              "status": "success", "http_status": 200}]}]}

``input_tokens`` is the whole prompt, cached tokens included (as OpenAI's
``prompt_tokens`` is); an ``error`` call answers its ``http_status`` (429,
500, ...) with OpenAI's error body, and its usage is ignored.

What it does:

- Serves a small OpenAI-compatible Chat Completions endpoint on 127.0.0.1
  (an ephemeral port, in a thread). Each request names its scenario call in an
  ``x-scenario-call: <session index>:<call index>`` header, so the answer
  (model, usage, status) is exactly the scenario's.
- Runs one process per service, side by side (one after the other, in the
  order the services first appear, with ``--json-out``): the
  OpenTelemetry resource (``service.name``) belongs to a TracerProvider, and
  the OpenAI instrumentation patches the openai package once per process
  with one provider. A process per service is how such services run in
  production, and it keeps every service's spans on its own provider without
  un- and re-patching the openai package in one process.
- Each session's calls run inside one parent span, so they share a trace id:
  with ``"conversation": true`` (the default) an ``invoke_agent <service>``
  span from opentelemetry-util-genai carrying ``gen_ai.conversation.id`` =
  the session id; with ``"conversation": false`` a plain ``agent_session``
  span. The chat spans themselves never carry ``gen_ai.conversation.id`` in
  these versions: the instrumentation's chat path has no way to set it
  (util-genai 1.3b0 adds one, but the instrumentation 2.4b0 does not run on
  it; see ``.ci/otel-peer.sh``).
- Failed calls raise in the openai client (``max_retries=0``); the error is
  caught and the session goes on.
- Spans go through a BatchSpanProcessor to an ``OTLPSpanExporter`` (with
  ``authorization: Bearer <token>`` from ``--token-file``, gzip with
  ``--gzip``), and with ``--json-out`` also to a file as OTLP/JSON lines, one
  ``{"resourceSpans": [...]}`` per exported batch, the way the OpenTelemetry
  Collector's file exporter writes them (ids in hex, 64-bit integers as
  decimal strings, enums as numbers). At least one of the two is needed.

It prints one JSON line, ``{"spans": N, "calls": N, "errors": N, "services":
[...]}`` (spans exported, chat calls made, calls that failed as scripted),
and exits non-zero when an export failed or a call did not go as scripted.
"""

import argparse
import base64
import json
import os
import secrets
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

API_KEY = "sk-test"
CALL_HEADER = "x-scenario-call"


# --- the scenario -----------------------------------------------------------


def load_scenario(path):
    with open(path, encoding="utf-8") as f:
        scenario = json.load(f)
    sessions = scenario.get("sessions")
    if not isinstance(sessions, list) or not sessions:
        raise SystemExit("scenario: 'sessions' must be a non-empty list")
    for si, session in enumerate(sessions):
        for key in ("session_id", "service", "calls"):
            if key not in session:
                raise SystemExit(f"scenario: session {si} has no {key!r}")
        for ci, call in enumerate(session["calls"]):
            where = f"scenario: session {si} call {ci}"
            if not isinstance(call.get("model"), str) or not call["model"]:
                raise SystemExit(f"{where}: 'model' must be a string")
            status = call.get("status", "success")
            if status not in ("success", "error"):
                raise SystemExit(f"{where}: 'status' must be success or error")
            http_status = int(call.get("http_status", 200 if status == "success" else 500))
            if (status == "success") != (http_status == 200):
                raise SystemExit(f"{where}: status {status} with http_status {http_status}")
            if status == "success":
                inp, cached, out = (int(call.get(k, 0)) for k in ("input_tokens", "cached_tokens", "output_tokens"))
                if min(inp, cached, out) < 0 or cached > inp:
                    raise SystemExit(f"{where}: tokens must be >= 0 and cached_tokens <= input_tokens")
    return scenario


def services_in_order(scenario):
    seen = []
    for session in scenario["sessions"]:
        if session["service"] not in seen:
            seen.append(session["service"])
    return seen


# --- the OpenAI-compatible server --------------------------------------------
#
# Shapes follow the openai package's own response types in the installed
# version (openai 2.54.0): openai/types/chat/chat_completion.py (ChatCompletion,
# Choice), openai/types/chat/chat_completion_message.py,
# openai/types/completion_usage.py (CompletionUsage, PromptTokensDetails,
# CompletionTokensDetails) and openai/types/shared/error_object.py (the
# {"error": {...}} body, which openai/_client.py _make_status_error turns into
# RateLimitError for 429 and InternalServerError for 5xx).

_ERRORS = {
    400: ("invalid_request_error", None, "The request was invalid."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    404: ("invalid_request_error", "model_not_found", "The model does not exist or you do not have access to it."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again in 20ms."),
    500: ("server_error", None, "The server had an error while processing your request. Sorry about that!"),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
}


def error_body(status, message=None):
    err_type, code, default = _ERRORS.get(status, ("server_error" if status >= 500 else "invalid_request_error", None, "Request failed."))
    return {"error": {"message": message or default, "type": err_type, "param": None, "code": code}}


def completion_body(call):
    prompt = int(call.get("input_tokens", 0))
    cached = int(call.get("cached_tokens", 0))
    completion = int(call.get("output_tokens", 0))
    return {
        "id": "chatcmpl-" + secrets.token_hex(14),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": call["model"],
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Done.",
                    "refusal": None,
                    "annotations": [],
                },
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": None,
    }


class ModelServer:
    """Answers POST /v1/chat/completions from the scenario, in a thread."""

    def __init__(self, scenario):
        self.scenario = scenario
        self.served = []  # (session index, call index, status) per answer
        self.problems = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _answer(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("x-request-id", "req_" + secrets.token_hex(16))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                if self.path != "/v1/chat/completions":
                    return self._answer(404, error_body(404, f"Invalid URL (POST {self.path})"))
                if self.headers.get("authorization") != f"Bearer {API_KEY}":
                    return self._answer(401, error_body(401))
                try:
                    request = json.loads(raw)
                    si, ci = (int(x) for x in self.headers[CALL_HEADER].split(":"))
                    call = server.scenario["sessions"][si]["calls"][ci]
                except (ValueError, KeyError, IndexError, TypeError, AttributeError):
                    server.problem(f"a request without a valid {CALL_HEADER} header or body")
                    return self._answer(400, error_body(400, f"missing or unknown {CALL_HEADER}"))
                if request.get("model") != call["model"]:
                    server.problem(f"call {si}:{ci} asked for {request.get('model')!r}, not {call['model']!r}")
                status = call.get("status", "success")
                server.record(si, ci, status)
                if status == "error":
                    http_status = int(call.get("http_status", 500))
                    return self._answer(http_status, error_body(http_status))
                return self._answer(200, completion_body(call))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def record(self, si, ci, status):
        with self._lock:
            self.served.append((si, ci, status))

    def problem(self, message):
        with self._lock:
            self.problems.append(message)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


# --- OTLP/JSON lines ----------------------------------------------------------

_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def _hex_ids(value):
    """protobuf's JSON mapping writes bytes as base64; OTLP/JSON wants the
    trace and span ids as (lowercase) hex."""
    if isinstance(value, dict):
        return {
            k: (base64.b64decode(v).hex() if k in _ID_KEYS and isinstance(v, str) else _hex_ids(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    return value


def otlp_json_line(spans):
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    request = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    return json.dumps(_hex_ids(request), separators=(",", ":"))


# --- one service's process ----------------------------------------------------


def open_agent(genai, service, conversation_id):
    """The span a session with a conversation runs in: 2.4b0's
    ``invoke_local_agent``, carrying the conversation id."""
    parent = genai.invoke_local_agent(agent_name=service)
    parent.conversation_id = conversation_id
    return parent


def run_service(args, instrumentor=None, open_conversation=open_agent,
                system=lambda service: f"You are {service}.", tracer_name="costwatch.otel_agent"):
    """Runs the sessions of one service (``--service``) against ``--base-url``;
    prints {"service", "spans", "calls", "errors", "unexpected", "export_ok"}.
    ``instrumentor`` (the instrumentation's ``OpenAIInstrumentor`` class),
    ``open_conversation(handler, service, conversation_id)`` (the span a
    conversation runs in) and ``system(service)`` (the system prompt) are
    what an agent of another instrumentation changes."""
    import openai
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    if instrumentor is None:
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as instrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.util.genai.handler import TelemetryHandler

    class RecordingExporter(SpanExporter):
        """Passes batches to the OTLP exporter and keeps its results; writes
        them as OTLP/JSON lines too with --json-out."""

        def __init__(self, inner, json_out):
            self.inner = inner
            self.json_out = json_out
            self.spans = 0
            self.failures = 0
            self.lock = threading.Lock()

        def export(self, spans):
            result = SpanExportResult.SUCCESS
            with self.lock:
                if self.json_out:
                    with open(self.json_out, "a", encoding="utf-8") as f:
                        f.write(otlp_json_line(spans) + "\n")
                if self.inner is not None:
                    result = self.inner.export(spans)
                if result is SpanExportResult.SUCCESS:
                    self.spans += len(spans)
                else:
                    self.failures += 1
            return result

        def shutdown(self):
            if self.inner is not None:
                self.inner.shutdown()

        def force_flush(self, timeout_millis=30000):
            return True if self.inner is None else self.inner.force_flush(timeout_millis)

    scenario = load_scenario(args.scenario)
    service = args.service

    otlp = None
    if args.endpoint:
        headers = {}
        if args.token_file:
            with open(args.token_file, encoding="utf-8") as f:
                headers["authorization"] = "Bearer " + f.read().strip()
        otlp = OTLPSpanExporter(
            endpoint=args.endpoint,
            headers=headers,
            compression=Compression.Gzip if args.gzip else Compression.NoCompression,
        )
    exporter = RecordingExporter(otlp, args.json_out)
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    instrumentor().instrument(tracer_provider=provider)
    tracer = provider.get_tracer(tracer_name)
    genai = TelemetryHandler(tracer_provider=provider)

    client = openai.OpenAI(base_url=args.base_url, api_key=API_KEY, max_retries=0, timeout=30)
    calls = errors = unexpected = 0
    for si, session in enumerate(scenario["sessions"]):
        if session["service"] != service:
            continue
        if session.get("conversation", True):
            parent = open_conversation(genai, service, str(session["session_id"]))
        else:
            parent = tracer.start_as_current_span("agent_session")
        with parent:
            for ci, call in enumerate(session["calls"]):
                calls += 1
                expect_error = call.get("status", "success") == "error"
                try:
                    client.chat.completions.create(
                        model=call["model"],
                        messages=[
                            {"role": "system", "content": system(service)},
                            {"role": "user", "content": f"Step {ci + 1} of session {session['session_id']}."},
                        ],
                        temperature=0.2,
                        extra_headers={CALL_HEADER: f"{si}:{ci}"},
                    )
                    if expect_error:
                        unexpected += 1
                        print(f"call {si}:{ci} succeeded but was scripted to fail", file=sys.stderr)
                except openai.APIStatusError as error:
                    errors += 1
                    if not expect_error or error.status_code != int(call.get("http_status", 500)):
                        unexpected += 1
                        print(f"call {si}:{ci} failed unscripted: {error!r}", file=sys.stderr)
                except openai.OpenAIError as error:
                    errors += 1
                    unexpected += 1
                    print(f"call {si}:{ci} failed unscripted: {error!r}", file=sys.stderr)

    flushed = provider.force_flush()
    provider.shutdown()
    export_ok = flushed and exporter.failures == 0
    print(
        json.dumps(
            {
                "service": service,
                "spans": exporter.spans,
                "calls": calls,
                "errors": errors,
                "unexpected": unexpected,
                "export_ok": export_ok,
            }
        ),
        flush=True,
    )
    return 0 if export_ok and unexpected == 0 else 1


# --- the driver ---------------------------------------------------------------


def main(run=run_service, doc=__doc__, script=__file__):
    """The driver: one process per service (``script --service S``, which
    calls ``run``), side by side, and the summary of them all."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--endpoint", help="OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces")
    parser.add_argument("--token-file", help="file holding the bearer token for the endpoint")
    parser.add_argument("--gzip", action="store_true", help="gzip the export requests")
    parser.add_argument("--json-out", help="also write the spans as OTLP/JSON lines to this file")
    parser.add_argument("--service", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.endpoint and not args.json_out:
        parser.error("give --endpoint, --json-out or both")

    if args.service is not None:
        return run(args)

    scenario = load_scenario(args.scenario)
    if args.json_out:
        open(args.json_out, "w", encoding="utf-8").close()
    total = {"spans": 0, "calls": 0, "errors": 0, "services": []}
    status = 0
    with ModelServer(scenario) as server:
        commands = []
        for service in services_in_order(scenario):
            cmd = [sys.executable, os.path.abspath(script), "--scenario", args.scenario,
                   "--service", service, "--base-url", server.base_url]
            for flag in ("endpoint", "token_file", "json_out"):
                if getattr(args, flag):
                    cmd += ["--" + flag.replace("_", "-"), getattr(args, flag)]
            if args.gzip:
                cmd.append("--gzip")
            commands.append((service, cmd))
        # The services run side by side, as a fleet does; one after the
        # other when they append to one JSON file, so lines never mix.
        if args.json_out:
            outcomes = [(service, subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False))
                        for service, cmd in commands]
        else:
            running = [(service, subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
                       for service, cmd in commands]
            outcomes = []
            for service, proc in running:
                out, _ = proc.communicate()
                outcomes.append((service, subprocess.CompletedProcess(proc.args, proc.returncode, out)))
        for service, child in outcomes:
            try:
                result = json.loads(child.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                print(f"service {service}: no summary (exit {child.returncode})", file=sys.stderr)
                status = 1
                continue
            if child.returncode != 0:
                print(f"service {service}: {json.dumps(result)}", file=sys.stderr)
                status = 1
            for key in ("spans", "calls", "errors"):
                total[key] += result[key]
            total["services"].append(service)
        expected = sum(len(s["calls"]) for s in scenario["sessions"])
        if len(server.served) != expected or server.problems:
            print(f"model server: served {len(server.served)} of {expected} calls; {server.problems}", file=sys.stderr)
            status = 1
    print(json.dumps(total), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
