#!/usr/bin/env bash
# Installs the OS packages actorlog needs on Debian/Ubuntu, only when they are missing:
# a Java runtime (ZooKeeper and PySpark), ZooKeeper 3.8 (the coordination service),
# Prometheus with promtool (dashboards and alert-rule tests), curl (the README's JSON API
# examples, which a test runs as written) and Chromium (a headless browser opens the rollup's
# HTML report in tests/ops/test_report_browser.py; nothing downloads a browser of its own).
# Runs apt-get update once, before the first install. Safe to run repeatedly.
#
# Optional extras, named as arguments, for targets that need more than `make test` does:
#   maven   Maven (`make interop` fetches Apache Kafka's jars from Maven Central with it).
set -euo pipefail

missing=()
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
for extra in "$@"; do
  case "$extra" in
    maven) command -v mvn >/dev/null 2>&1 || missing+=(maven) ;;
    *) echo "error: unknown extra '$extra' (known: maven)" >&2; exit 2 ;;
  esac
done
if [ -z "${ZOOKEEPER_HOME:-}" ] && ! ls /usr/share/java/zookeeper*.jar >/dev/null 2>&1; then
  missing+=(zookeeper)
fi
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v curl >/dev/null 2>&1 || missing+=(curl ca-certificates)
[ -x /usr/bin/chromium ] || missing+=(chromium)

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

# Deduplicate while keeping order.
readarray -t packages < <(printf '%s\n' "${missing[@]}" | awk '!seen[$0]++')
echo "installing OS packages: ${packages[*]}"

if [ "$(id -u)" -eq 0 ]; then
  sudo_cmd=()
elif command -v sudo >/dev/null 2>&1; then
  sudo_cmd=(sudo)
else
  echo "error: need root or sudo to install ${packages[*]} with apt-get" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "error: apt-get not found; install ${packages[*]} with your package manager" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
# policy-rc.d stops Debian from starting system services (zookeeper, prometheus) on install:
# actorlog starts its own instances on free ports.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo_cmd[@]}" tee "$policy" >/dev/null
  "${sudo_cmd[@]}" chmod +x "$policy"
  created_policy=1
fi
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${packages[@]}"
if [ "$created_policy" -eq 1 ]; then
  "${sudo_cmd[@]}" rm -f "$policy"
fi
