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

Everything but the instrumentation is ``otel_agent.py``'s, imported from
beside this file: the scenario, the local OpenAI-compatible server (which
answers each call's scripted usage, ``prompt_tokens_details.cached_tokens``
included), the process per service, the call loop, the OTLP/JSON lines of
``--json-out`` and the summary line. What differs is given to its
``run_service``:

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

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import otel_agent  # noqa: E402


def system_prompt(service):
    """A prompt prefix of a few thousand characters, the same for every call
    of the service."""
    rules = " ".join(f"Rule {n}: answer {service} questions politely and check the order history first." for n in range(60))
    return f"You are {service}. {rules}"


def open_workflow(genai, service, conversation_id):
    """The span a session with a conversation runs in: 1.3b0's workflow,
    whose conversation id the chat spans inside it carry."""
    return genai.workflow(service, conversation_id=conversation_id)


def run_service(args):
    """``otel_agent.run_service`` with today's instrumentation, its
    workflow span and the long system prompt."""
    from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor

    return otel_agent.run_service(
        args,
        instrumentor=OpenAIInstrumentor,
        open_conversation=open_workflow,
        system=system_prompt,
        tracer_name="costwatch.otel_genai_agent",
    )


if __name__ == "__main__":
    sys.exit(otel_agent.main(run=run_service, doc=__doc__, script=__file__))
