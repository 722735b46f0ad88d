#!/usr/bin/env bash
# Installs today's official OpenTelemetry OpenAI instrumentation for the
# second OTLP interop test into a venv of its own and prints the venv's
# python: opentelemetry-instrumentation-genai-openai with
# opentelemetry-util-genai, the OpenTelemetry Python SDK, its OTLP/HTTP span
# exporter (protobuf) and the openai client it instruments.
# tests/peers/otel_genai_agent.py drives them. Idempotent: a second run only
# checks the pins.
#
#   COSTWATCH_OTEL_GENAI_VENV   where the venv lives
#                               (default ~/.cache/costwatch-otel-genai)
#
# Tests find the python through COSTWATCH_OTEL_GENAI_PYTHON, else
# $COSTWATCH_OTEL_GENAI_VENV/bin/python.
#
# Why a venv beside .ci/otel-peer.sh's rather than one for both: that one
# pins opentelemetry-util-genai 1.1b0 and openai 2.x for
# opentelemetry-instrumentation-openai-v2 2.4b0, while
# opentelemetry-instrumentation-genai-openai 1.3b0 asks for
# opentelemetry-util-genai >=1.3b0.dev,<2 and works with openai >=1.26,<4
# (it reads the client's base URL through httpx or httpx2, whichever the
# client uses). openai is pinned to the newest 3.x, the client this
# instrumentation was seen with; the SDK and exporter to the same release as
# the other venv. opentelemetry-instrumentation and
# opentelemetry-semantic-conventions follow from those pins (the SDK pins
# the semantic conventions exactly).
set -euo pipefail

OTEL_SDK_VERSION="1.45.2"
OTLP_HTTP_VERSION="1.45.2"
GENAI_OPENAI_VERSION="1.3b0"
UTIL_GENAI_VERSION="1.3b0"
OPENAI_VERSION="3.63.0"
VENV="${COSTWATCH_OTEL_GENAI_VENV:-$HOME/.cache/costwatch-otel-genai}"
PY="$VENV/bin/python"

# shellcheck source=.ci/pinned-venv.sh
. "$(dirname "$0")/pinned-venv.sh"

PINS=(
  "opentelemetry-sdk==$OTEL_SDK_VERSION"
  "opentelemetry-exporter-otlp-proto-http==$OTLP_HTTP_VERSION"
  "opentelemetry-instrumentation-genai-openai==$GENAI_OPENAI_VERSION"
  "opentelemetry-util-genai==$UTIL_GENAI_VERSION"
  "openai==$OPENAI_VERSION"
)

# One pip run for all of them when any pin is off, so the resolver sees them
# together.
pinned_venv "$VENV" "${PINS[@]}"
"$PY" -c 'from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor' >/dev/null
"$PY" -c 'from opentelemetry.util.genai.handler import TelemetryHandler' >/dev/null
"$PY" -c 'from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter' >/dev/null
"$PY" -c 'from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest' >/dev/null
printf '%s\n' "$PY"
