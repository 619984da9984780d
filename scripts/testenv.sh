#!/usr/bin/env bash
# testenv.sh — run a command with private Redis, ClickHouse, Jaeger and Prometheus.
#
# Usage: scripts/testenv.sh <command...>
#
# Installs Debian's redis-server / redis-sentinel / clickhouse-server / clickhouse-client and
# prometheus (with promtool) and chromium when missing, starts one redis-server, a
# 3-master Redis Cluster (redis-server --cluster-enabled yes, joined by
# `redis-cli --cluster create`, no replicas), one clickhouse-server, Jaeger (built once by scripts/jaeger.sh) and
# Prometheus (on deploy/prometheus) on free loopback ports inside a temporary
# directory, waits until all answer, exports
#
#   DROPSTREAM_TEST_REDIS_URL       redis://127.0.0.1:PORT/0
#   DROPSTREAM_TEST_REDIS_CLUSTER   127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
#   DROPSTREAM_TEST_CLICKHOUSE_DSN  clickhouse://default:@127.0.0.1:PORT/default
#   DROPSTREAM_TEST_REDIS_SERVER    absolute path of the redis-server binary
#   DROPSTREAM_TEST_REDIS_SENTINEL  absolute path of redis-sentinel: tests of a failover
#                                   start a primary, a replica and three Sentinels of their
#                                   own (internal/testenv.StartRedisSentinel), so killing
#                                   the primary disturbs no other test
#   DROPSTREAM_TEST_PROMTOOL        absolute path of promtool (Debian's prometheus)
#   DROPSTREAM_TEST_CHROMIUM        absolute path of Debian's chromium, for the console's browser tests
#   DROPSTREAM_TEST_JAEGER_OTLP     http://127.0.0.1:PORT, Jaeger's OTLP/HTTP receiver
#   DROPSTREAM_TEST_JAEGER_QUERY    http://127.0.0.1:PORT, Jaeger's query API (/api/traces…)
#   DROPSTREAM_TEST_PROMETHEUS_URL  http://127.0.0.1:PORT of a Prometheus on deploy/prometheus
#   DROPSTREAM_TEST_PROMETHEUS_TARGETS  directory of its scrape targets (file_sd JSON files)
#   DROPSTREAM_TEST_REQUIRE         1 (tests must not skip for lack of servers)
#
# runs the command, then stops the servers and removes the temporary
# directory (also on failure, Ctrl-C or SIGTERM). Exits with the command's
# status. Tunables: TESTENV_READY_TIMEOUT (seconds to wait for each server,
# default 60). All diagnostics go to stderr so the command's stdout stays clean.
set -euo pipefail

log() { printf 'testenv: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [ "$#" -eq 0 ]; then
	echo "usage: $0 <command...>" >&2
	exit 2
fi

READY_TIMEOUT="${TESTENV_READY_TIMEOUT:-60}"

# --- installation -----------------------------------------------------------

as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo -n "$@"
	else
		die "need root or sudo to run: $*"
	fi
}

install_missing() {
	local pkgs=()
	command -v redis-server >/dev/null 2>&1 || pkgs+=(redis-server)
	command -v redis-cli >/dev/null 2>&1 || pkgs+=(redis-tools)
	command -v redis-sentinel >/dev/null 2>&1 || pkgs+=(redis-sentinel)
	command -v clickhouse-server >/dev/null 2>&1 || pkgs+=(clickhouse-server)
	command -v clickhouse-client >/dev/null 2>&1 || pkgs+=(clickhouse-client)
	command -v promtool >/dev/null 2>&1 || pkgs+=(prometheus)
	command -v chromium >/dev/null 2>&1 || pkgs+=(chromium)
	[ "${#pkgs[@]}" -eq 0 ] && return 0
	log "installing ${pkgs[*]} (apt-get)"
	# RUNLEVEL=1 keeps invoke-rc.d from starting the packaged services.
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null ||
		die "apt-get update failed"
	as_root env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 \
		apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null ||
		die "apt-get install ${pkgs[*]} failed"
}

install_missing
JAEGER="$("$(dirname "$0")/jaeger.sh")" || die "could not build jaeger (scripts/jaeger.sh)"
PROMETHEUS="$(command -v prometheus)"
REDIS_SERVER="$(command -v redis-server)"
CLICKHOUSE_SERVER="$(command -v clickhouse-server)"
[ -f /etc/clickhouse-server/config.xml ] || die "/etc/clickhouse-server/config.xml not found"

# --- temp dir and cleanup ---------------------------------------------------

TMP="$(mktemp -d "${TMPDIR:-/tmp}/dropstream-testenv.XXXXXX")"
REDIS_PID=""
CH_PID=""
JAEGER_PID=""
PROM_PID=""
CLUSTER_PIDS=()

stop_pid() { # stop_pid PID...: SIGTERM, wait up to 15 s, then SIGKILL.
	local pid i alive
	for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
	for i in $(seq 1 150); do
		alive=0
		for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
		[ "$alive" -eq 0 ] && break
		sleep 0.1
	done
	for pid in "$@"; do
		if kill -0 "$pid" 2>/dev/null; then
			log "pid $pid did not stop on SIGTERM; killing"
			kill -KILL "$pid" 2>/dev/null || true
		fi
		wait "$pid" 2>/dev/null || true
	done
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	local pids=()
	[ -n "$REDIS_PID" ] && pids+=("$REDIS_PID")
	[ -n "$CH_PID" ] && pids+=("$CH_PID")
	[ -n "$JAEGER_PID" ] && pids+=("$JAEGER_PID")
	[ -n "$PROM_PID" ] && pids+=("$PROM_PID")
	pids+=("${CLUSTER_PIDS[@]}")
	[ "${#pids[@]}" -gt 0 ] && stop_pid "${pids[@]}"
	rm -rf "$TMP"
	exit "$rc"
}

CMD_PID=""

# on_signal SIG STATUS: passes SIG on to the command's process group (if it
# runs yet), gives it 30 s to finish, then exits with STATUS (cleanup runs).
on_signal() {
	local killer
	if [ -n "$CMD_PID" ]; then
		kill -"$1" -- "-$CMD_PID" 2>/dev/null || true
		(sleep 30 && kill -KILL -- "-$CMD_PID") >/dev/null 2>&1 &
		killer=$!
		wait "$CMD_PID" 2>/dev/null || true
		kill "$killer" 2>/dev/null || true
	fi
	exit "$2"
}
trap cleanup EXIT
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM

# --- free ports -------------------------------------------------------------

USED_PORTS=" "
PORT=""

port_busy() {
	if command -v ss >/dev/null 2>&1; then
		[ -n "$(ss -Htan "( sport = :$1 )" 2>/dev/null)" ] && return 0
	fi
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# pick_port sets PORT to a free loopback port below the ephemeral range.
pick_port() {
	local p i
	for i in $(seq 1 500); do
		p=$((20000 + (RANDOM * 32768 + RANDOM) % 12000))
		case "$USED_PORTS" in *" $p "*) continue ;; esac
		port_busy "$p" && continue
		USED_PORTS+="$p "
		PORT="$p"
		return 0
	done
	die "no free port found"
}

pick_port; REDIS_PORT=$PORT
pick_port; CH_TCP_PORT=$PORT
pick_port; CH_HTTP_PORT=$PORT
pick_port; CH_INTER_PORT=$PORT
pick_port; JAEGER_OTLP_GRPC_PORT=$PORT
pick_port; JAEGER_OTLP_HTTP_PORT=$PORT
pick_port; JAEGER_QUERY_PORT=$PORT
pick_port; JAEGER_QUERY_GRPC_PORT=$PORT
pick_port; JAEGER_HEALTH_PORT=$PORT
pick_port; PROM_PORT=$PORT
# Redis Cluster nodes: a client port and a cluster bus port each.
CLUSTER_NODES=3
CLUSTER_PORTS=()
CLUSTER_BUS_PORTS=()
for _ in $(seq 1 "$CLUSTER_NODES"); do
	pick_port; CLUSTER_PORTS+=("$PORT")
	pick_port; CLUSTER_BUS_PORTS+=("$PORT")
done

# --- start servers ----------------------------------------------------------

mkdir -p "$TMP/redis" "$TMP/clickhouse/data" "$TMP/clickhouse/log"

# 1024 databases: internal/testenv gives every test a database of its own.
"$REDIS_SERVER" --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
	--dir "$TMP/redis" --daemonize no --databases 1024 >"$TMP/redis/redis.log" 2>&1 &
REDIS_PID=$!

# Redis Cluster: 3 masters, no replicas, no persistence. Without replicas a
# failed master would otherwise stop the whole cluster; tests of that case
# start clusters of their own (internal/testenv.StartRedisCluster).
for i in $(seq 0 $((CLUSTER_NODES - 1))); do
	d="$TMP/cluster/$i"
	mkdir -p "$d"
	(cd "$d" && exec "$REDIS_SERVER" --port "${CLUSTER_PORTS[$i]}" --bind 127.0.0.1 \
		--cluster-enabled yes --cluster-config-file nodes.conf \
		--cluster-port "${CLUSTER_BUS_PORTS[$i]}" --cluster-node-timeout 5000 \
		--cluster-require-full-coverage no --save "" --appendonly no \
		--dir "$d" --daemonize no >"$d/redis.log" 2>&1) &
	CLUSTER_PIDS+=($!)
done

CH_DIR="$TMP/clickhouse"
cp /etc/clickhouse-server/config.xml /etc/clickhouse-server/users.xml "$CH_DIR/"
sed -i \
	-e "s#/var/lib/clickhouse/#$CH_DIR/data/#g" \
	-e "s#/var/log/clickhouse-server/#$CH_DIR/log/#g" \
	-e "s#<tcp_port>[0-9]*</tcp_port>#<tcp_port>$CH_TCP_PORT</tcp_port><listen_host>127.0.0.1</listen_host>#" \
	-e "s#<http_port>[0-9]*</http_port>#<http_port>$CH_HTTP_PORT</http_port>#" \
	-e "s#<interserver_http_port>[0-9]*</interserver_http_port>#<interserver_http_port>$CH_INTER_PORT</interserver_http_port>#" \
	-e "\#<tcp_port_secure>#d" \
	-e "\#<https_port>#d" \
	-e "\#^[[:space:]]*<listen_host>[^<]*</listen_host>[[:space:]]*\$#d" \
	"$CH_DIR/config.xml"
grep -q "<tcp_port>$CH_TCP_PORT</tcp_port>" "$CH_DIR/config.xml" ||
	die "could not set tcp_port in $CH_DIR/config.xml"
# No ZooKeeper, clusters or macros are configured: the Debian config marks them
# optional includes from /etc/metrika.xml, which does not exist.
# DROPSTREAM_TESTENV_CLICKHOUSE_NICE (default 0) starts clickhouse-server at
# that nice level: benchmarks of the hot path on a machine it shares with
# ClickHouse set 19, as such a deployment should (docs/operating.md); tests
# leave it at 0, so that ClickHouse keeps up with parallel test binaries.
(cd "$CH_DIR" && exec nice -n "${DROPSTREAM_TESTENV_CLICKHOUSE_NICE:-0}" "$CLICKHOUSE_SERVER" \
	--config-file="$CH_DIR/config.xml" >"$CH_DIR/log/stdout.log" 2>&1) &
CH_PID=$!

# Jaeger v2 all-in-one on memory storage: OTLP in, the query API out, every
# port free and on loopback (its defaults are fixed ports on all interfaces).
JAEGER_DIR="$TMP/jaeger"
mkdir -p "$JAEGER_DIR"
cat >"$JAEGER_DIR/config.yaml" <<YAML
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:$JAEGER_HEALTH_PORT
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:$JAEGER_QUERY_PORT
    grpc:
      endpoint: 127.0.0.1:$JAEGER_QUERY_GRPC_PORT
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$JAEGER_OTLP_GRPC_PORT
      http:
        endpoint: 127.0.0.1:$JAEGER_OTLP_HTTP_PORT
processors:
  batch:
    timeout: 200ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
YAML
"$JAEGER" --config "$JAEGER_DIR/config.yaml" >"$JAEGER_DIR/jaeger.log" 2>&1 &
JAEGER_PID=$!

# Prometheus on the project's own prometheus.yml, rewritten for tests: scrapes
# and rule evaluation every second, the alert rules from the repository, and
# the scrape targets taken from files the tests write into
# $PROM_DIR/targets (file_sd: one JSON file per test, read within a second)
# instead of the compose stack's host names.
PROM_DIR="$TMP/prometheus"
PROM_CONFIG_SRC="$(cd "$(dirname "$0")/.." && pwd)/deploy/prometheus"
mkdir -p "$PROM_DIR/targets" "$PROM_DIR/data"
cp "$PROM_CONFIG_SRC/alerts.yml" "$PROM_DIR/alerts.yml"
awk -v targets="$PROM_DIR/targets/*.json" '
	/^[[:space:]]*(scrape|evaluation)_interval:/ { sub(/:.*/, ": 1s"); print; next }
	/^[[:space:]]*static_configs:/ {
		indent = substr($0, 1, match($0, /[^ ]/) - 1)
		print indent "file_sd_configs:"
		print indent "  - files: [\"" targets "\"]"
		print indent "    refresh_interval: 1s"
		skipping = 1; next
	}
	skipping && /^[[:space:]]*(-[[:space:]]|targets:)/ { next }
	{ skipping = 0; print }
' "$PROM_CONFIG_SRC/prometheus.yml" >"$PROM_DIR/prometheus.yml"
grep -q "file_sd_configs" "$PROM_DIR/prometheus.yml" || die "could not rewrite the scrape targets of prometheus.yml"
(cd "$PROM_DIR" && exec "$PROMETHEUS" --config.file="$PROM_DIR/prometheus.yml" \
	--storage.tsdb.path="$PROM_DIR/data" --web.listen-address="127.0.0.1:$PROM_PORT" \
	>"$PROM_DIR/prometheus.log" 2>&1) &
PROM_PID=$!

show_logs() { # show_logs FILE...: last lines of each existing file.
	local f
	for f in "$@"; do
		[ -s "$f" ] || continue
		log "last lines of $f:"
		tail -n 40 "$f" >&2 || true
	done
}

# wait_ready NAME PID "LOGFILE..." CMD...: polls CMD until it succeeds, for at
# most READY_TIMEOUT seconds; fails early when PID exits.
wait_ready() {
	local name=$1 pid=$2 logs=$3 start=$SECONDS
	shift 3
	until "$@" >/dev/null 2>&1; do
		if ! kill -0 "$pid" 2>/dev/null; then
			log "$name exited before answering"
			# shellcheck disable=SC2086 # logs is a space-separated list
			show_logs $logs
			exit 1
		fi
		if [ $((SECONDS - start)) -ge "$READY_TIMEOUT" ]; then
			log "$name not ready after ${READY_TIMEOUT}s"
			# shellcheck disable=SC2086
			show_logs $logs
			exit 1
		fi
		sleep 0.1
	done
}

redis_ping() { [ "$(redis-cli -h 127.0.0.1 -p "${1:-$REDIS_PORT}" ping 2>/dev/null)" = "PONG" ]; }
cluster_ok() { # cluster_ok PORT: the node serves every slot of the cluster.
	local info
	info="$(redis-cli -h 127.0.0.1 -p "$1" cluster info 2>/dev/null)" || return 1
	case "$info" in *cluster_state:ok*) ;; *) return 1 ;; esac
	case "$info" in *cluster_slots_ok:16384*) return 0 ;; *) return 1 ;; esac
}
# http_ok PORT PATH: GET answers 200 (bash's /dev/tcp: no curl needed).
http_ok() {
	(
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$2" >&3
		IFS= read -r status <&3
		case "$status" in *" 200 "*) exit 0 ;; *) exit 1 ;; esac
	)
}
ch_ping() { clickhouse-client --host 127.0.0.1 --port "$CH_TCP_PORT" --query 'select 1'; }

started=$(date +%s%N)
wait_ready redis-server "$REDIS_PID" "$TMP/redis/redis.log" redis_ping
CLUSTER_ADDRS=()
for i in $(seq 0 $((CLUSTER_NODES - 1))); do
	wait_ready "redis cluster node $i" "${CLUSTER_PIDS[$i]}" "$TMP/cluster/$i/redis.log" \
		redis_ping "${CLUSTER_PORTS[$i]}"
	CLUSTER_ADDRS+=("127.0.0.1:${CLUSTER_PORTS[$i]}")
done
# The cluster forms (about 2 s: a new master waits before it serves) while
# clickhouse-server starts.
redis-cli --cluster create "${CLUSTER_ADDRS[@]}" --cluster-replicas 0 --cluster-yes \
	>"$TMP/cluster/create.log" 2>&1 &
CREATE_PID=$!
wait_ready clickhouse-server "$CH_PID" \
	"$CH_DIR/log/clickhouse-server.err.log $CH_DIR/log/stdout.log" ch_ping
if ! wait "$CREATE_PID"; then
	log "redis-cli --cluster create failed"
	show_logs "$TMP/cluster/create.log"
	exit 1
fi
for i in $(seq 0 $((CLUSTER_NODES - 1))); do
	wait_ready "redis cluster node $i (cluster_state:ok)" "${CLUSTER_PIDS[$i]}" \
		"$TMP/cluster/$i/redis.log $TMP/cluster/create.log" cluster_ok "${CLUSTER_PORTS[$i]}"
done
wait_ready jaeger "$JAEGER_PID" "$JAEGER_DIR/jaeger.log" http_ok "$JAEGER_QUERY_PORT" /api/services
wait_ready prometheus "$PROM_PID" "$PROM_DIR/prometheus.log" http_ok "$PROM_PORT" /-/ready
REDIS_CLUSTER="$(IFS=,; echo "${CLUSTER_ADDRS[*]}")"
log "redis on 127.0.0.1:$REDIS_PORT, redis cluster on $REDIS_CLUSTER," \
	"clickhouse on 127.0.0.1:$CH_TCP_PORT, jaeger on 127.0.0.1:$JAEGER_QUERY_PORT (OTLP/HTTP $JAEGER_OTLP_HTTP_PORT)," \
	"prometheus on 127.0.0.1:$PROM_PORT, ready in $((($(date +%s%N) - started) / 1000000)) ms"

export DROPSTREAM_TEST_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
export DROPSTREAM_TEST_REDIS_CLUSTER="$REDIS_CLUSTER"
export DROPSTREAM_TEST_CLICKHOUSE_DSN="clickhouse://default:@127.0.0.1:$CH_TCP_PORT/default"
export DROPSTREAM_TEST_REDIS_SERVER="$REDIS_SERVER"
export DROPSTREAM_TEST_REDIS_SENTINEL="$(command -v redis-sentinel)"
export DROPSTREAM_TEST_PROMTOOL="$(command -v promtool)"
export DROPSTREAM_TEST_CHROMIUM="$(command -v chromium)"
export DROPSTREAM_TEST_JAEGER_OTLP="http://127.0.0.1:$JAEGER_OTLP_HTTP_PORT"
export DROPSTREAM_TEST_JAEGER_QUERY="http://127.0.0.1:$JAEGER_QUERY_PORT"
export DROPSTREAM_TEST_PROMETHEUS_URL="http://127.0.0.1:$PROM_PORT"
export DROPSTREAM_TEST_PROMETHEUS_TARGETS="$PROM_DIR/targets"
export DROPSTREAM_TEST_REQUIRE=1

# --- run --------------------------------------------------------------------

set +e
if [ -t 0 ]; then
	# Interactive: run in the foreground so it owns the terminal; Ctrl-C
	# reaches it directly and cleanup runs when it returns.
	"$@"
	status=$?
else
	# Non-interactive (CI, make): run in its own process group so that a
	# SIGINT/SIGTERM sent to this script is passed on to the whole command
	# tree at once instead of waiting for the command to finish.
	set -m
	"$@" <&0 &
	CMD_PID=$!
	set +m
	wait "$CMD_PID"
	status=$?
	CMD_PID=""
fi
set -e
exit "$status"
