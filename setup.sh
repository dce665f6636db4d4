#!/usr/bin/env bash
# Installs everything VeriHarness needs on a Debian machine: system packages (chromium,
# tesseract-ocr, fonts, bubblewrap for the agent sandbox), the Python package with its dependencies, and the pinned Claude Code
# CLI under .tools/claude. Safe to run again: finished steps are skipped quickly.
#
#   ./setup.sh          what the workflow needs
#   ./setup.sh --test   the same plus the test tools (pytest, hypothesis, ruff), the
#                       single-node SLURM used by the cluster test (slurm-wlm, munge), the
#                       pinned MCP Inspector CLI under .tools/mcp-inspector and the optional
#                       extra `inspect` (inspect_ai, which the export's tests read logs with)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

want_test=0
for arg in "$@"; do
  case "$arg" in
    --test) want_test=1 ;;
    *) echo "setup.sh: unknown option '$arg' (known: --test)" >&2; exit 2 ;;
  esac
done

say() { printf 'setup: %s\n' "$*"; }

# --- system packages -----------------------------------------------------------------------
apt_packages=(chromium tesseract-ocr tesseract-ocr-eng fonts-dejavu-core fonts-liberation bubblewrap nodejs npm)
[ "$want_test" = 1 ] && apt_packages+=(slurm-wlm munge curl)  # curl: the containment tests probe with it

missing=()
for pkg in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
# node/npm may come from elsewhere (nvm, conda): only the commands matter.
if command -v node >/dev/null && command -v npm >/dev/null; then
  filtered=()
  for pkg in "${missing[@]}"; do [[ "$pkg" == nodejs || "$pkg" == npm ]] || filtered+=("$pkg"); done
  missing=("${filtered[@]}")
fi

if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup: these system packages are missing: ${missing[*]}" >&2
    echo "setup: this shell cannot install them (needs root and apt-get). Ask an administrator for" >&2
    echo "       'apt-get install ${missing[*]}', or with conda:" >&2
    echo "       'conda install -c conda-forge tesseract nodejs' and point VERIHARNESS_CHROMIUM at a" >&2
    echo "       Chromium or Chrome binary you have. Without bubblewrap, set agent.isolation: none" >&2
    echo "       in your config to run sessions unsandboxed (recorded). Then run ./setup.sh again." >&2
    exit 1
  fi
fi

# --- Python package ------------------------------------------------------------------------
extras="."
[ "$want_test" = 1 ] && extras=".[test,slurm,inspect]"
stamp=".tools/pip-${want_test}.stamp"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  say "installing the Python package (pip install -e '$extras')"
  python3 -m pip install -q --disable-pip-version-check -e "$extras"
  command -v pyenv >/dev/null && pyenv rehash || true
  mkdir -p .tools && touch "$stamp"
fi
# An editable install leaves src/ without bytecode. Where PYTHONDONTWRITEBYTECODE is set (this
# machine kind sets it), every verb process would compile the modules it imports again; Python
# still reads the .pyc files the variable stops it writing, and ignores one older than its source.
python3 -m compileall -q src/veriharness >/dev/null

# --- the pinned Claude Code CLI --------------------------------------------------------------
claude_version=$(sed -n 's/^claude-code-version = "\(.*\)"/\1/p' pyproject.toml)
claude_bin=".tools/claude/node_modules/.bin/claude"
if ! { [ -x "$claude_bin" ] && "$claude_bin" --version 2>/dev/null | grep -q "^$claude_version "; }; then
  say "installing @anthropic-ai/claude-code@$claude_version under .tools/claude"
  mkdir -p .tools/claude
  npm install --prefix .tools/claude --no-fund --no-audit --loglevel=error \
    "@anthropic-ai/claude-code@$claude_version" >/dev/null
fi

# --- the pinned MCP Inspector (tests only) -----------------------------------------------------
# tests/mllm/test_mllm_inspector.py drives the mllm server with its CLI, a client not our own.
if [ "$want_test" = 1 ]; then
  inspector_version=$(sed -n 's/^mcp-inspector-version = "\(.*\)"/\1/p' pyproject.toml)
  inspector_bin=".tools/mcp-inspector/node_modules/.bin/mcp-inspector"
  if ! { [ -x "$inspector_bin" ] && [ "$("$inspector_bin" --cli --version 2>/dev/null)" = "$inspector_version" ]; }; then
    say "installing @modelcontextprotocol/inspector@$inspector_version under .tools/mcp-inspector"
    mkdir -p .tools/mcp-inspector
    npm install --prefix .tools/mcp-inspector --no-fund --no-audit --loglevel=error \
      "@modelcontextprotocol/inspector@$inspector_version" >/dev/null
  fi
fi

python3 -m veriharness check-setup
