#!/usr/bin/env bash
# The router's Prometheus endpoint and the operator files in deploy/ work with
# the real tools:
# 1. example configurations run with `[control] metrics_listen`; `/metrics` is
#    scraped with curl and `promtool check metrics` lints every scrape, which
#    must find nothing to say;
# 2. `promtool check config deploy/prometheus.yml` passes;
# 3. a Prometheus server scrapes two routers through deploy/prometheus.yml and
#    evaluates every query of deploy/grafana/router.json (panels and variables):
#    each must be accepted, and return data when its metrics have samples.
#
#   bash scripts/test-metrics.sh                            # every config/*.toml
#   bash scripts/test-metrics.sh config/fair-transit.toml   # chosen configurations (step 1)
#
# promtool and prometheus come from the Debian package `prometheus`, installed
# when missing and the script runs as root (without leaving a Prometheus server
# running); otherwise the test is skipped with a message. Scrapes are kept in
# target/metrics/.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "test-metrics: $*"; }

# Only the binaries are wanted, but the package's maintainer scripts would start
# (and enable) a Prometheus server on :9090: policy-rc.d (exit 101) forbids
# starting services while it installs, and on a systemd machine the unit is
# disabled and stopped afterwards.
install_tools() {
  if [ "$(id -u)" -ne 0 ]; then
    say "promtool not found and not root: skipped (install the Debian package" \
      "'prometheus', or put promtool on PATH)"
    return 1
  fi
  if ! command -v apt-get >/dev/null; then
    say "promtool not found and no apt-get: skipped (put promtool on PATH)"
    return 1
  fi
  local guard=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    guard=/usr/sbin/policy-rc.d
  fi
  local apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq
    --no-install-recommends prometheus jq)
  say "installing promtool (Debian package prometheus)"
  local rc=0
  "${apt[@]}" >/dev/null || { apt-get update -qq >/dev/null && "${apt[@]}" >/dev/null; } || rc=$?
  [ -z "$guard" ] || rm -f "$guard"
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
    systemctl disable --now prometheus.service >/dev/null 2>&1 || true
  fi
  if [ "$rc" -ne 0 ] || ! command -v promtool >/dev/null; then
    say "could not install promtool: skipped"
    return 1
  fi
}

command -v promtool >/dev/null || install_tools || exit 0
command -v curl >/dev/null || { say "curl not found: skipped"; exit 0; }

# promtool must object to what breaks the conventions, or its silence proves nothing.
if [ -z "$(printf 'x_requests 1\n' | promtool check metrics 2>&1)" ]; then
  say "promtool accepts an untyped metric without HELP: this promtool cannot be used"
  exit 1
fi

cargo build --locked -p router
router="${CARGO_TARGET_DIR:-target}/debug/router"

work="$(mktemp -d)"
out="target/metrics"
mkdir -p "$out"
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"

# A port nothing listens on now (a router may still lose it to another
# program: then it is started again on another one).
free_port() {
  local p
  for _ in $(seq 1 100); do
    p=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

# Stops process $1 (started by this script) and forgets it.
stop() {
  local p keep=()
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  for p in "${pids[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  pids=("${keep[@]}")
}

# Starts the router on configuration $1 with /metrics on a free port and waits
# until it answers; sets `pid` and `port` (and adds the process to `pids`).
start() {
  local cfg="$1" name url
  name="$(basename "$cfg" .toml)"
  for _ in 1 2 3; do
    port="$(free_port)"
    # The configuration with its own `[control]` tables (if any) replaced; it
    # is copied, so it must not name files by relative path.
    awk '/^[[:space:]]*\[/ { skip = ($0 ~ /^[[:space:]]*\[control[].]/) } !skip' \
      "$cfg" >"$work/$name.toml"
    cat >>"$work/$name.toml" <<EOF

[control]
listen = "127.0.0.1:0"
metrics_listen = "127.0.0.1:$port"
token_file = "$work/token"
EOF
    # Virtual time: a long run, stopped once scraped.
    "$router" run "$work/$name.toml" --duration 60min --quiet \
      >"$work/$name.out" 2>"$work/$name.err" &
    pid=$!
    pids+=("$pid")
    url="http://127.0.0.1:$port/metrics"
    for _ in $(seq 1 150); do
      curl -sf -o /dev/null "$url" && return 0
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    stop "$pid"
    # Only a lost port is worth another try.
    grep -q "control.metrics_listen" "$work/$name.err" || break
  done
  say "$cfg: the router did not serve $url"
  cat "$work/$name.err"
  return 1
}

# 1. Every scrape passes `promtool check metrics`.
if [ "$#" -gt 0 ]; then
  configs=("$@")
else
  for want in default flowpolice-edge sibra-transit zlane-border fair-transit; do
    [ -f "config/$want.toml" ] || { say "config/$want.toml is missing"; exit 1; }
  done
  # No example runs `sibra-control` (SIBRA's admission tables, whose levels
  # are gauges): sibra-transit with it appended.
  mkdir -p "$work/extra"
  cat config/sibra-transit.toml - >"$work/extra/sibra-control.toml" <<'EOF'

[[pipeline]]
kind = "sibra-control"
key = "2b7e151628aed2a6abf7158809cf4f3c"
interfaces = [{ ifid = 2, port = 0, capacity_bps = 1000000000 }, { ifid = 3, port = 1, capacity_bps = 1000000000 }]
EOF
  configs=(config/*.toml "$work/extra/sibra-control.toml")
fi

failed=()
for cfg in "${configs[@]}"; do
  name="$(basename "$cfg" .toml)"
  start "$cfg" || { failed+=("$name"); continue; }
  url="http://127.0.0.1:$port/metrics"
  # Scrape once packets have gone through (stage counters, drops and the
  # stages' named values have samples), then once more a moment later.
  for _ in $(seq 1 50); do
    curl -sf "$url" >"$out/$name.prom"
    grep -Eq '^router_bursts_total [1-9]' "$out/$name.prom" && break
    sleep 0.2
  done
  sleep 0.5
  curl -sf "$url" >"$out/$name.prom"
  stop "$pid"
  lint="$(promtool check metrics <"$out/$name.prom" 2>&1)" && rc=0 || rc=$?
  samples="$(grep -vc '^#' "$out/$name.prom" || true)"
  named="$(grep -Ec '^router_(stage|egress)_(events_total|level)\{' "$out/$name.prom" || true)"
  if [ "$rc" -ne 0 ] || [ -n "$lint" ]; then
    say "$name: promtool check metrics (exit $rc):"
    echo "$lint"
    failed+=("$name")
  elif ! grep -Eq '^router_stage_packets_total\{.*\} [1-9]' "$out/$name.prom"; then
    say "$name: no stage saw a packet ($out/$name.prom)"
    failed+=("$name")
  else
    say "$name: ok ($samples samples, $named named stage/egress values)"
  fi
done

# 2. The example scrape configuration.
promtool check config deploy/prometheus.yml >/dev/null || failed+=("deploy/prometheus.yml")

# 3. The dashboard's queries on a Prometheus server scraping two routers.
if [ "$#" -gt 0 ]; then
  :
elif ! command -v prometheus >/dev/null || ! command -v jq >/dev/null; then
  say "prometheus or jq not found: the dashboard's queries are not evaluated"
else
  targets=()
  scrapes=()
  for cfg in config/default.toml config/flowpolice-edge.toml; do
    start "$cfg" || { failed+=("dashboard"); break; }
    targets+=("\"127.0.0.1:$port\"")
    scrapes+=("$out/$(basename "$cfg" .toml).prom")
  done
  prom_port="$(free_port)"
  # deploy/prometheus.yml with these routers as targets, scraped every second.
  list="$(IFS=,; echo "${targets[*]}")"
  sed -e "s/scrape_interval: 5s/scrape_interval: 1s/" \
    -e "s/\[\"127.0.0.1:9464\"\]/[$list]/" deploy/prometheus.yml >"$work/prometheus.yml"
  grep -q "scrape_interval: 1s" "$work/prometheus.yml" && grep -qF "[$list]" "$work/prometheus.yml" ||
    { say "deploy/prometheus.yml has no 5s interval or 127.0.0.1:9464 target to replace"; exit 1; }
  prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$work/prometheus.log" 2>&1 &
  pids+=("$!")
  api="http://127.0.0.1:$prom_port/api/v1"
  # Query $1 (instant); prints the JSON answer.
  query() { curl -s --data-urlencode "query=$1" "$api/query"; }
  # Ready once both targets are up and have been scraped a few times.
  ready=""
  for _ in $(seq 1 60); do
    n="$(query 'count(count_over_time(router_bursts_total[1m]) >= 4)' 2>/dev/null |
      jq -r '.data.result[0].value[1] // 0' 2>/dev/null || echo 0)"
    [ "$n" = "${#targets[@]}" ] && { ready=1; break; }
    sleep 0.5
  done
  if [ -z "$ready" ]; then
    say "Prometheus did not scrape the routers:"
    cat "$work/prometheus.log"
    failed+=("dashboard")
  else
    # Grafana's variables as the dashboard's "All" selects them.
    subst() {
      sed -e 's/\$__rate_interval/30s/g' -e 's/\$__interval/5s/g' \
        -e 's/\$instance/.*/g' -e 's/\$port/.*/g' -e 's/\$stage/.*/g'
    }
    bad=0
    total=0
    empty=()
    while IFS= read -r expr; do
      total=$((total + 1))
      q="$(printf '%s' "$expr" | subst)"
      answer="$(query "$q")"
      if [ "$(jq -r .status <<<"$answer")" != success ]; then
        say "dashboard query refused: $expr"
        jq -r .error <<<"$answer"
        bad=1
      elif [ "$(jq '.data.result | length' <<<"$answer")" -eq 0 ]; then
        # Empty is right only for families without a sample in these scrapes.
        for m in $(grep -Eo 'router_[a-z_]+' <<<"$expr" | sort -u); do
          if grep -Eq "^$m(\{| )" "${scrapes[@]}"; then
            say "dashboard query returns nothing although $m has samples: $expr"
            bad=1
            break
          fi
        done
        empty+=("$expr")
      fi
    done < <(jq -r '.panels[] | .targets[]? | .expr' deploy/grafana/router.json)
    # Variables: label_values(<selector>, <label>) as Grafana asks for them.
    while IFS= read -r def; do
      total=$((total + 1))
      sel="$(sed -E 's/^label_values\((.*), *([a-zA-Z_]+)\)$/\1/' <<<"$def" | subst)"
      label="$(sed -E 's/^label_values\((.*), *([a-zA-Z_]+)\)$/\2/' <<<"$def")"
      values="$(curl -s -G --data-urlencode "match[]=$sel" "$api/label/$label/values" |
        jq '.data | length')"
      if [ "${values:-0}" -eq 0 ]; then
        say "dashboard variable query finds no values: $def"
        bad=1
      fi
    done < <(jq -r '.templating.list[] | .definition' deploy/grafana/router.json)
    if [ "$bad" -ne 0 ]; then
      failed+=("dashboard")
    else
      say "dashboard: $total queries evaluated, $((total - ${#empty[@]})) with data" \
        "(empty: families without samples on these routers)"
    fi
  fi
fi

if [ "${#failed[@]}" -gt 0 ]; then
  say "failed: ${failed[*]}"
  exit 1
fi
say "${#configs[@]} configuration(s) ok"
