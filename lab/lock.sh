# lab/lock.sh -- sourced by the lab's scripts: read_lock FILE sets one shell variable per KEY=VALUE line of a
# lock file (lab/versions.lock, lab/fake-gcs-server.lock); '#' starts a comment, blank lines are skipped.
read_lock() {
  local line
  [[ -f $1 ]] || { printf 'missing %s\n' "$1" >&2; return 1; }
  while IFS= read -r line || [[ -n $line ]]; do
    line=${line%%#*}; line=${line%"${line##*[![:space:]]}"}
    [[ $line =~ ^([A-Z][A-Z0-9_]*)=(.*)$ ]] || continue
    printf -v "${BASH_REMATCH[1]}" '%s' "${BASH_REMATCH[2]}"
  done < "$1"
}
