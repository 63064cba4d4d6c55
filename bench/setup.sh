#!/usr/bin/env bash
# Idempotent setup for the spider benchmarks.
#   - Debian packages: nginx (static file server), wget (baseline crawler), wrk (optional load check)
#   - bench/.venv with Scrapy + psutil (+ py-spy) for the Scrapy baseline and profiling.
# The crawler itself runs with the main python (the one that runs bench/*.py).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$HERE/.venv"
PY="${PYTHON:-python3}"

need_pkgs=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need_pkgs+=(nginx)
command -v wget >/dev/null 2>&1 || need_pkgs+=(wget)
if [ ${#need_pkgs[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -q
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need_pkgs[@]}"
fi
# wrk is optional: install it only if the Debian archive has it (it is used for the nginx sanity check).
if ! command -v wrk >/dev/null 2>&1; then
    if apt-cache show wrk >/dev/null 2>&1; then
        SUDO=""
        [ "$(id -u)" -ne 0 ] && SUDO="sudo"
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk || echo "wrk not installed (optional)"
    fi
fi
# Debian starts the system nginx on install; the benchmark runs its own nginx on a free port, so
# the system one is left alone (it listens on :80 and does not interfere).

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import scrapy, psutil" >/dev/null 2>&1; then
    "$VENV/bin/pip" install -q --upgrade pip
    "$VENV/bin/pip" install -q scrapy psutil
fi
# py-spy is optional (profiling the crawler); failure to install it is not fatal.
"$VENV/bin/python" -c "import importlib.util,sys; sys.exit(0 if importlib.util.find_spec('py_spy') or __import__('shutil').which('py-spy', path='$VENV/bin') else 1)" >/dev/null 2>&1 \
    || "$VENV/bin/pip" install -q py-spy || echo "py-spy not installed (optional)"

# The main python needs psutil to run the benchmark scripts.
"$PY" -c "import psutil" >/dev/null 2>&1 || "$PY" -m pip install -q psutil

echo "--- versions"
/usr/sbin/nginx -v 2>&1 || nginx -v 2>&1
wget --version | head -n 1
command -v wrk >/dev/null 2>&1 && (wrk --version 2>&1 | head -n 1 || true)
echo "main python: $("$PY" --version 2>&1) ($(command -v "$PY")), psutil $("$PY" -c 'import psutil; print(psutil.__version__)')"
echo "venv: $("$VENV/bin/python" --version 2>&1), scrapy $("$VENV/bin/python" -c 'import scrapy; print(scrapy.__version__)'), psutil $("$VENV/bin/python" -c 'import psutil; print(psutil.__version__)')"
[ -x "$VENV/bin/py-spy" ] && echo "py-spy: $("$VENV/bin/py-spy" --version)"
exit 0
