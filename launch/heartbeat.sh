# Sourced by the launch scripts: no stretch of more than 10 s without a line on the console.
#   with_heartbeat LABEL CMD...   runs CMD; while it runs, prints "[LABEL] still working (N s)"
#                                 every 10 s; returns CMD's exit status
#   heartbeat_lines LABEL         a filter: copies its input line by line and, after 10 s
#                                 without a line, prints "[LABEL] still working on: <last line>"
with_heartbeat() {
  local label="$1" start=$SECONDS rc=0 tick
  shift
  ( while sleep 10; do echo "[$label] still working ($((SECONDS - start)) s)"; done ) &
  tick=$!
  "$@" || rc=$?
  kill "$tick" 2>/dev/null || true
  wait "$tick" 2>/dev/null || true
  return "$rc"
}

heartbeat_lines() {
  local label="$1" line="" last="" start=$SECONDS rc
  while :; do
    if IFS= read -r -t 10 line; then
      printf '%s\n' "$line"
      last="$line"
    else
      rc=$?
      [ "$rc" -gt 128 ] || { [ -n "$line" ] && printf '%s\n' "$line"; break; }
      echo "[$label] still working ($((SECONDS - start)) s) on: ${last:0:120}"
    fi
  done
}
