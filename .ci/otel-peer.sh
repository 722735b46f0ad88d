#!/usr/bin/env bash
# Installs a real OpenTelemetry client for the OTLP interop tests into a venv
# and prints the venv's python: the OpenTelemetry Python SDK, its OTLP/HTTP
# span exporter (protobuf), the official OpenAI GenAI instrumentation
# (opentelemetry-instrumentation-openai-v2, from opentelemetry-python-contrib)
# and the openai client it instruments. tests/peers/otel_agent.py drives
# them. Idempotent: a second run only checks the pins.
#
#   COSTWATCH_OTEL_VENV   where the venv lives (default ~/.cache/costwatch-otel)
#
# Tests find the python through COSTWATCH_OTEL_PYTHON, else
# $COSTWATCH_OTEL_VENV/bin/python.
#
# Why these pins and not simply the newest of each:
# - openai 3.x moved from httpx to httpx2, and the instrumentation 2.4b0
#   imports httpx (for the client's base URL, which gives server.address and
#   server.port): 2.54.0 is the newest openai on httpx.
# - the instrumentation asks only for opentelemetry-util-genai>=0.4b0, but
#   2.4b0 imports opentelemetry.util.genai.instruments and calls
#   TelemetryHandler.start_inference, which 1.2b0 renamed and removed:
#   1.1b0 is the newest that works, so it is pinned here.
set -euo pipefail

OTEL_SDK_VERSION="1.45.2"
OTLP_HTTP_VERSION="1.45.2"
OPENAI_V2_VERSION="2.4b0"
UTIL_GENAI_VERSION="1.1b0"
OPENAI_VERSION="2.54.0"
VENV="${COSTWATCH_OTEL_VENV:-$HOME/.cache/costwatch-otel}"
PY="$VENV/bin/python"

# shellcheck source=.ci/pinned-venv.sh
. "$(dirname "$0")/pinned-venv.sh"

PINS=(
  "opentelemetry-sdk==$OTEL_SDK_VERSION"
  "opentelemetry-exporter-otlp-proto-http==$OTLP_HTTP_VERSION"
  "opentelemetry-instrumentation-openai-v2==$OPENAI_V2_VERSION"
  "opentelemetry-util-genai==$UTIL_GENAI_VERSION"
  "openai==$OPENAI_VERSION"
)

# One pip run for all of them when any pin is off, so the resolver sees them
# together.
pinned_venv "$VENV" "${PINS[@]}"
"$PY" -c 'from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor' >/dev/null
"$PY" -c 'from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter' >/dev/null
"$PY" -c 'from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest' >/dev/null
printf '%s\n' "$PY"
