# The start of the bash session that runs a README's shell examples (test/support/readme-examples.ts).
set -Eeuo pipefail
exec 2>&1
# Markers between the output of blocks and commands: \036 never occurs in the examples' output.
__ats_mark() { printf '\n\036%s %s\036\n' "$1" "$2"; }
# The URLs among curl's arguments, without their query (presigned links carry signatures).
__ats_urls() { local a; for a in "$@"; do [[ $a == http://* || $a == https://* ]] && printf '%s ' "${a%%\?*}"; done; return 0; }
# curl as written, but an HTTP error status fails the command (curl -s alone exits 0 on a 404),
# unless the README shows an error body as the expected output (ATS_HTTP_ERROR_EXPECTED).
curl() {
  local hdr rc=0 status
  hdr=$(mktemp)
  command curl -D "$hdr" "$@" || rc=$?
  status=$(awk '/^HTTP\//{s=$2} END{print s}' "$hdr")
  rm -f "$hdr"
  if ((rc)); then printf '\nreadme-test: curl exited %s: %s\n' "$rc" "$(__ats_urls "$@")" >&2; return "$rc"; fi
  if [[ ${status:-0} -ge 400 && -z ${ATS_HTTP_ERROR_EXPECTED:-} ]]; then printf '\nreadme-test: HTTP %s from %s\n' "$status" "$(__ats_urls "$@")" >&2; return 22; fi
  return 0
}
# The line that failed, for the report.
trap 'rc=$?; printf "\n\036F %s\036\n" "$LINENO"; exit $rc' ERR
