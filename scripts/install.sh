#!/usr/bin/env bash
# Installs what the project needs and is missing: npm packages (when package-lock.json changed)
# and the Debian packages chromium, nats-server, ffmpeg, socat and iproute2 (a browser's
# forwarder and loopback in its network namespace), webext-ublock-origin-chromium (the EasyList and
# EasyPrivacy files of block_ads), time (the CPU of each test file), and for the Python client's tests Debian's
# python3 with httpx, pytest, venv, setuptools and wheel (as root; otherwise says how).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ]]; then
  # npm install, not npm ci: the registry mirror lacks some packages' other-platform optional
  # binaries (@bufbuild/buf-darwin-*), which npm ci demands in the lock file. The lock still pins
  # every version.
  echo "install: npm install (from package-lock.json)"
  npm install --no-audit --no-fund --loglevel=error
fi

declare -A bin=([chromium]=chromium [nats-server]=nats-server [ffmpeg]=ffmpeg [socat]=socat [iproute2]=ss)
missing=()
for pkg in chromium nats-server ffmpeg socat iproute2; do
  command -v "${bin[$pkg]}" >/dev/null 2>&1 || missing+=("$pkg")
done
[[ -f /usr/share/chromium/extensions/ublock-origin/assets/thirdparties/easylist/easylist.txt ]] || missing+=(webext-ublock-origin-chromium)
# GNU time: `make test` reports the CPU each test file used (scripts/test.ts; without it, wall time only).
[[ -x /usr/bin/time ]] || missing+=(time)
# The Python client is built and tested with Debian's python3 (PyPI is not reachable): its
# modules are Debian packages too.
declare -A pymod=([python3-httpx]=httpx [python3-pytest]=pytest [python3-venv]=ensurepip [python3-setuptools]=setuptools [python3-wheel]=wheel)
for pkg in python3-httpx python3-pytest python3-venv python3-setuptools python3-wheel; do
  [[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c "import ${pymod[$pkg]}" >/dev/null 2>&1 || missing+=("$pkg")
done
((${#missing[@]} == 0)) && exit 0

if [[ $(id -u) -eq 0 ]]; then
  echo "install: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || echo "install: apt-get update failed; trying the cached package lists" >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  echo "install: sudo apt-get install ${missing[*]}"
  sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "install: missing Debian packages: ${missing[*]}" >&2
  echo "install: run as root, or: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
