#!/usr/bin/env bash
# Make the environment hetero_dse runs in, installing only what is missing:
#   system packages  g++ (C-simulation of generated HLS code), iverilog (RTL checks with pyverilog),
#                    postgresql (the history database's tests start a throwaway server on loopback),
#                    chromium (the tests load report.html in it headless and keep a screenshot),
#                    python3-venv where the interpreter lacks it;
#   .venv/           a virtual environment with hetero_dse installed editable, its dependencies pinned by
#                    constraints.txt (TVM 0.27 with the ffi that does not segfault, the CPU build of torch).
# Re-running is cheap: the Python step is skipped until pyproject.toml or constraints.txt change.
# Sourced by scripts/example.sh and scripts/test.sh; sets VENV_PY for them.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${HETERO_DSE_VENV:-$ROOT/.venv}"

log() { printf 'bootstrap: %s\n' "$*" >&2; }

pick_python() {
  for candidate in python3.11 python3.12 python3.10 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(0 if (3, 10) <= sys.version_info[:2] < (3, 13) else 1)' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  return 1
}

missing=()
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v iverilog >/dev/null 2>&1 || missing+=(iverilog)
command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 ||
  command -v google-chrome >/dev/null 2>&1 || missing+=(chromium)
PYTHON="$(pick_python || true)"
[ -n "$PYTHON" ] || missing+=(python3 python3-venv)
if [ -n "$PYTHON" ] && ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then missing+=(python3-venv); fi

if [ "${#missing[@]}" -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    log "please install: ${missing[*]} (no apt-get on this machine)"; exit 1
  fi
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { log "installing ${missing[*]} needs root or sudo"; exit 1; }
    SUDO="sudo"
  fi
  log "installing system packages: ${missing[*]}"
  $SUDO apt-get update -qq
  # Debian's package is chromium; an archive without one (Ubuntu's) has chromium-browser
  if [[ " ${missing[*]} " == *" chromium "* ]] && ! apt-cache show chromium >/dev/null 2>&1; then
    missing=("${missing[@]/#chromium/chromium-browser}")
  fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  PYTHON="$(pick_python)" || { log "no Python 3.10-3.12 found after installing python3"; exit 1; }
fi

if [ ! -x "$VENV/bin/python" ]; then
  log "creating the virtual environment $VENV with $($PYTHON --version)"
  "$PYTHON" -m venv "$VENV"
fi
VENV_PY="$VENV/bin/python"
STAMP="$VENV/.hetero_dse-installed"
if [ ! -f "$STAMP" ] || [ "$ROOT/pyproject.toml" -nt "$STAMP" ] || [ "$ROOT/constraints.txt" -nt "$STAMP" ]; then
  log "installing hetero_dse and its dependencies into $VENV (first time: a few minutes)"
  "$VENV_PY" -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v "is ignored" >&2 || true
  "$VENV_PY" -m pip install -q --disable-pip-version-check -c "$ROOT/constraints.txt" -e "$ROOT[dev]" 2>&1 \
    | { grep -v "is ignored" >&2 || true; }
  "$VENV_PY" -c 'import tvm, torch, hetero_dse' || { log "the install did not complete"; exit 1; }
  touch "$STAMP"
fi
export VENV_PY
