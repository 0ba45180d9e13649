#!/usr/bin/env bash
# Run a launch command, keep its log, and upload the log to Crash KB if the command fails.
#
#   scripts/kb-upload-on-failure.sh vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2
#
# The plain-shell counterpart of `kb run`, for hosts without the kb client: bash, tee and
# curl only. The command's output (stdout and stderr merged) goes to the terminal and to
# a log file in $KB_LOG_DIR. When the command exits non-zero, the log is posted to
# $KB_SERVER/incidents with the command line, exit code, host and GPUs. If the service
# cannot take it (unreachable, timeout, 5xx, 429, 401/403) the log goes to the spool
# ($KB_SPOOL_DIR) in the layout `kb flush` sends, so it is never lost; a log the service
# refuses (other 4xx) stays in $KB_LOG_DIR. Exits with the command's own status.
#
# Environment: KB_SERVER (default http://127.0.0.1:8000), KB_TOKEN (Bearer token),
# KB_LOG_DIR / KB_SPOOL_DIR (default ~/.local/share/crash-kb/{logs,spool}),
# KB_REPORTER (default: login name), KB_UPLOAD_TIMEOUT (seconds, default 60).
set -u

if [ "$#" -eq 0 ]; then
    echo "usage: $0 COMMAND [ARGS...]" >&2
    exit 2
fi

server=${KB_SERVER:-http://127.0.0.1:8000}
server=${server%/}
server=${server%/incidents}
data_dir=${XDG_DATA_HOME:-$HOME/.local/share}/crash-kb
log_dir=${KB_LOG_DIR:-$data_dir/logs}
spool_dir=${KB_SPOOL_DIR:-$data_dir/spool}

say() { echo "kb-upload-on-failure: $*" >&2; }

mkdir -p -m 700 "$log_dir" || { say "cannot create $log_dir"; exit 1; }
name=$(basename -- "$1" | tr -c 'A-Za-z0-9_.\n-' '-')
log="$log_dir/$(date +%Y%m%d-%H%M%S)-${name}-$$.log"

# tee -i: on Ctrl-C the command stops, but tee still copies its last lines.
"$@" 2>&1 | tee -i "$log"
status=${PIPESTATUS[0]}
if [ "$status" -eq 0 ]; then
    exit 0
fi
say "$1 exited with $status; uploading $log"

# --- metadata -------------------------------------------------------------------------
key=$(cat /proc/sys/kernel/random/uuid 2>/dev/null || uuidgen 2>/dev/null || echo "$$-$RANDOM$RANDOM$RANDOM")
key=$(printf '%s' "$key" | tr -d '-' | tr 'A-F' 'a-f')
command_line=$(printf '%q ' "$@")
command_line=${command_line% }
host=$(hostname 2>/dev/null || uname -n)
reporter=${KB_REPORTER:-$(id -un 2>/dev/null || echo unknown)}
if command -v timeout >/dev/null 2>&1; then smi=(timeout 10 nvidia-smi); else smi=(nvidia-smi); fi
gpus=$("${smi[@]}" --query-gpu=name --format=csv,noheader 2>/dev/null | sed -e 's/^ *//' -e 's/ *$//' -e '/^$/d')
gpu=""
gpu_count=""
if [ -n "$gpus" ]; then
    gpu=$(printf '%s\n' "$gpus" | sort | uniq -c | sort -rn | head -n 1 | sed 's/^ *[0-9]* //')
    gpu_count=$(printf '%s\n' "$gpus" | wc -l | tr -d ' ')
fi

# name=value pairs, sent as --form-string (taken literally: no @file or ;type= magic)
fields=("command=$command_line" "exit_code=$status" "host=$host" "reporter=$reporter")
[ -n "$gpu" ] && fields+=("gpu=$gpu" "gpu_count=$gpu_count")
[ -n "${CUDA_VISIBLE_DEVICES+set}" ] && fields+=("cuda_visible_devices=$CUDA_VISIBLE_DEVICES")

# --- upload ---------------------------------------------------------------------------
answer="$log.answer.json"
args=(-sS --max-time "${KB_UPLOAD_TIMEOUT:-60}" --connect-timeout 10 -o "$answer" -w '%{http_code}'
      -H "Idempotency-Key: $key" -H "Accept: application/json"
      -F "log=@\"${log//\"/\\\"}\";type=text/plain")
for field in "${fields[@]}"; do args+=(--form-string "$field"); done
[ -n "${KB_TOKEN:-}" ] && args+=(-H "Authorization: Bearer $KB_TOKEN")
code=$(curl "${args[@]}" "$server/incidents")
curl_status=$?
[ -n "$code" ] || code=000

case "$code" in
    2??)
        url=$(sed -n 's/.*"incident" *: *{[^}]*"url" *: *"\([^"]*\)".*/\1/p' "$answer" | head -n 1)
        say "uploaded (HTTP $code): ${url:-see $answer}"
        say "the service's answer is in $answer; the log stays at $log"
        exit "$status"
        ;;
    000|5??|408|425|429|401|403)
        if [ "$code" = 000 ]; then reason="cannot reach $server (curl exit $curl_status)"; else reason="HTTP $code"; fi
        ;;
    *)
        say "the server refused the log (HTTP $code): $(head -c 300 "$answer" 2>/dev/null)"
        say "the log is kept at $log"
        exit "$status"
        ;;
esac

# --- spool: the layout `kb flush` reads (keep in step with kb/client/spool.py) ---------
json_str() {
    local s=$1
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//$'\t'/\\t}
    s=${s//$'\n'/\\n}
    s=${s//$'\r'/\\r}
    printf '"%s"' "$s"
}

say "could not upload: $reason"
micro=$(date -u +%6N 2>/dev/null)
case "$micro" in [0-9][0-9][0-9][0-9][0-9][0-9]) ;; *) micro=000000 ;; esac
id="$(date -u +%Y%m%dT%H%M%S)${micro}-${key:0:12}"
tmp="$spool_dir/.tmp-$id"
write_meta() {
    printf '{\n  "version": 1,\n  "idempotency_key": %s,\n' "$(json_str "$key")"
    printf '  "source": "kb-upload-on-failure.sh",\n  "created_at": %s,\n' "$(json_str "$(date -u +%Y-%m-%dT%H:%M:%SZ)")"
    printf '  "attempts": 0,\n  "first_error": %s,\n  "original_log": %s,\n' "$(json_str "$reason")" "$(json_str "$log")"
    printf '  "server": %s,\n  "fields": {' "$(json_str "$server")"
    local sep="" field
    for field in "${fields[@]}"; do
        printf '%s\n    %s: %s' "$sep" "$(json_str "${field%%=*}")" "$(json_str "${field#*=}")"
        sep=","
    done
    printf '\n  }\n}\n'
}

# Written under a dot-name, then renamed: `kb flush` never sees half an entry.
if mkdir -p -m 700 "$spool_dir" && mkdir -m 700 "$tmp" && cp -- "$log" "$tmp/log" \
        && write_meta >"$tmp/meta.json"; then
    sync "$tmp/log" "$tmp/meta.json" 2>/dev/null
    if mv -- "$tmp" "$spool_dir/$id"; then
        say "saved to the spool: $spool_dir/$id"
        say "send it once the server is reachable with: kb flush   (the log also stays at $log)"
        exit "$status"
    fi
fi
rm -rf -- "$tmp" 2>/dev/null
say "could not write to the spool $spool_dir; the log is kept at $log"
exit "$status"
