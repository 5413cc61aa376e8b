#!/usr/bin/env bash
# Set up SIMPACT on a fresh machine: system libraries, the virtual environment, the project.
#   scripts/setup.sh [EXTRAS]      e.g. scripts/setup.sh dev
# System libraries: EGL (offscreen rendering) and libusb-1.0 (open3d, pyrealsense2). They are installed
# with apt-get when missing and we may (root, or sudo without a password); otherwise we stop and print
# the exact command to run.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
venv="${VENV:-.venv}"
python="${PYTHON:-python3}"

missing=()
have_lib() { ldconfig -p 2>/dev/null | grep -q "$1"; }
have_lib 'libEGL.so.1' || missing+=(libegl1)
have_lib 'libEGL_mesa.so.0' || missing+=(libegl-mesa0 libgl1-mesa-dri)
have_lib 'libusb-1.0.so.0' || missing+=(libusb-1.0-0)
if ((${#missing[@]})); then
  cmd="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing system libraries: ${missing[*]}"
    sh -c "$cmd" >/dev/null
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    echo "setup: installing system libraries with sudo: ${missing[*]}"
    sudo sh -c "$cmd" >/dev/null
  else
    echo "setup: missing system libraries ${missing[*]}; please run:" >&2
    echo "  sudo sh -c '$cmd'" >&2
    exit 1
  fi
fi

if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating $venv"
  "$python" -m venv "$venv"
fi
# uv installs the project: it resolves in seconds, links the files from its cache and byte-compiles on every
# core (about 1 minute for [dev] from a warm cache, against about 4 with pip). pip installs only uv itself.
[ -x "$venv/bin/uv" ] || "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "uv>=0.9" 2>&1 \
  | grep -v "is ignored: it is neither a file nor a directory" || true
[ -x "$venv/bin/uv" ] || { echo "setup: pip could not install uv into $venv (see above)" >&2; exit 1; }
install=("$venv/bin/uv" pip install --quiet --python "$venv/bin/python" --compile-bytecode)
# pip's settings, from its config files and PIP_* variables (an index mirror, wheels kept on this disk, a
# constraints file, a CA bundle), for uv, which reads neither: see scripts/pip_settings.py.
while IFS= read -r arg; do
  case "$arg" in
    SSL_CERT_FILE=*) export SSL_CERT_FILE="${SSL_CERT_FILE:-${arg#SSL_CERT_FILE=}}" ;;
    ?*) install+=("$arg") ;;
  esac
done < <("$venv/bin/python" -m pip config list 2>/dev/null | "$venv/bin/python" scripts/pip_settings.py)
spec="."
[ -n "$extras" ] && spec=".[$extras]"
packages=(-e "$spec")
# torch (the [deformable] extra, in [dev]) is asked for at one release, $TORCH_SPEC: left to the extra's range
# the newest CUDA build would be taken (about 5.5 GB in the venv; CI once ran out of disk). Machines that keep
# torch 2.13.0's CPU wheel on disk (pip's find-links) get that file; elsewhere PyPI's build.
case ",$extras," in
  *,dev,*|*,deformable,*)
    "$venv/bin/python" -c "import torch" 2>/dev/null || packages+=("${TORCH_SPEC:-torch==2.13.0}")
    ;;
esac
echo "setup: installing simpact$([ -n "$extras" ] && echo "[$extras]") into $venv"
"${install[@]}" "${packages[@]}"
"$venv/bin/python" -c "import simpact, solvers, real2sim, robot" \
  || { echo "setup: the install is broken" >&2; exit 1; }
