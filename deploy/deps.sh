#!/usr/bin/env bash
# Installs the Debian packages boardd needs to build (and, with --test, to test) when any is
# missing. Idempotent: does nothing when everything is there.
set -euo pipefail
pkgs=(meson ninja-build pkg-config gcc libc6-dev libmicrohttpd-dev libgnutls28-dev libjansson-dev libssl-dev
      libmongoc-dev libbson-dev libcurl4-openssl-dev) # libcurl: the webhook deliverer, boardctl
# libpq: bench/'s PostgreSQL drivers (drain, pg_cycle), built in every build so they do not
# rot; optional to meson, and not in the image (deploy/Dockerfile builds server/boardd only).
pkgs+=(libpq-dev)
if [ "${1:-}" = "--test" ]; then
  pkgs+=(check python3 python3-venv curl procps clang libclang-rt-14-dev) # clang: the fuzz smoke
  pkgs+=(openjdk-17-jdk-headless maven) # mongo-java-server, the atomic Mongo test server
  pkgs+=(chromium) # tests/ui: the operator UI in a real browser (Playwright drives it)
  pkgs+=(openssl gnutls-bin prometheus) # TLS test: certificates, a TLS 1.1 client; promtool
  pkgs+=(docker-compose systemd) # tests/deploy: `docker-compose config`, `systemd-analyze verify`
  pkgs+=(groff-base) # tests/docs: the man pages render without a warning
  pkgs+=(postgresql) # tests/bench: pg_cycle's smoke on a private cluster (Debian's PostgreSQL)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
