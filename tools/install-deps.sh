#!/usr/bin/env bash
# Installs every build, test and reference dependency from Debian packages.
# Idempotent; run as root (or through sudo). Safe to run on a machine that already has them.
set -euo pipefail

packages=(
  build-essential g++ cmake ninja-build pkg-config git clang-format
  clang libclang-rt-14-dev llvm  # the sanitizer build: clang, its ASan/UBSan/libFuzzer runtimes, llvm-symbolizer
  libdnnl-dev ocl-icd-opencl-dev
  libcpp-httplib-dev nlohmann-json3-dev libspdlog-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev libpcre2-dev libicu-dev
  python3 python3-numpy python3-jinja2
  curl ca-certificates
  nginx-light
)

# Node 20 with its bundled npm is preinstalled on our machines (NodeSource build, which conflicts with
# Debian's separate npm package); fall back to Debian's packages only where node is absent.
if ! command -v node >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  sudo_cmd=(sudo)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
