"""The scripted agent of ``otel_agent.py``, traced by today's official OpenAI
instrumentation, for costwatch's second OTLP interop test.

The real ``openai`` client (3.63.0), traced by
``opentelemetry-instrumentation-genai-openai`` 1.3b0 with
``opentelemetry-util-genai`` 1.3b0, through the OpenTelemetry Python SDK
(1.45.2) and its OTLP/HTTP protobuf span exporter. ``.ci/otel-peer-genai.sh``
installs them in a venv of their own.

    python otel_genai_agent.py --scenario scenario.json \\
        [--endpoint http://127.0.0.1:PORT/v1/traces] [--token-file F] \\
        [--gzip] [--json-out F]

The scenario, the local OpenAI-compatible server (which answers each call's
scripted usage, ``prompt_tokens_details.cached_tokens`` included), the
process per service, the OTLP/JSON lines of ``--json-out`` and the summary
line are ``otel_agent.py``'s, imported from beside this file. What differs
is the instrumentation's API:

- ``OpenAIInstrumentor`` comes from
  ``opentelemetry.instrumentation.genai.openai``; its chat spans carry
  ``gen_ai.usage.cache_read.input_tokens`` only when the answer's
  ``cached_tokens`` is above 0, and cache writes as
  ``gen_ai.usage.cache_write.input_tokens``.
- A session with ``"conversation": true`` (the default) runs inside
  ``TelemetryHandler().workflow(conversation_id=<session id>)``: an
  ``invoke_workflow`` span whose conversation id the chat spans inside it
  inherit (they carry ``gen_ai.conversation.id`` themselves). With
  ``"conversation": false``, a plain ``agent_session`` span.
- Every call of a session sends the same long system prompt (the prefix a
  provider would cache) and a short user message of its own.
"""

import argparse
import json
import os
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from otel_agent import (  # noqa: E402
    API_KEY,
    CALL_HEADER,
    ModelServer,
    load_scenario,
    otlp_json_line,
    services_in_order,
)


def system_prompt(service):
    """A prompt prefix of a few thousand characters, the same for every call
    of the service."""
    rules = " ".join(f"Rule {n}: answer {service} questions politely and check the order history first." for n in range(60))
    return f"You are {service}. {rules}"


def run_service(args):
    """Runs the sessions of one service (``--service``) against ``--base-url``;
    prints {"service", "spans", "calls", "errors", "unexpected", "export_ok"}."""
    import openai
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
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
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    tracer = provider.get_tracer("costwatch.otel_genai_agent")
    genai = TelemetryHandler(tracer_provider=provider)

    client = openai.OpenAI(base_url=args.base_url, api_key=API_KEY, max_retries=0, timeout=30)
    prefix = system_prompt(service)
    calls = errors = unexpected = 0
    for si, session in enumerate(scenario["sessions"]):
        if session["service"] != service:
            continue
        if session.get("conversation", True):
            parent = genai.workflow(service, conversation_id=str(session["session_id"]))
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
                            {"role": "system", "content": prefix},
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
        return run_service(args)

    scenario = load_scenario(args.scenario)
    if args.json_out:
        open(args.json_out, "w", encoding="utf-8").close()
    total = {"spans": 0, "calls": 0, "errors": 0, "services": []}
    status = 0
    with ModelServer(scenario) as server:
        commands = []
        for service in services_in_order(scenario):
            cmd = [sys.executable, os.path.abspath(__file__), "--scenario", args.scenario,
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
