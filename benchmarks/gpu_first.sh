#!/usr/bin/env bash
# The whole GPU run in one go (issue 37): `attn-cost doctor --gpu --json`, then `attn-cost campaign --gpu`, both
# writing into one folder as they go, inside one time limit that the script itself keeps.
#
#   benchmarks/gpu_first.sh OUT [MINUTES] [EARLIER]
#
#   OUT      the folder for everything: OUT/doctor.json and OUT/campaign/ (the campaign's log, measurements,
#            summary, device profiles; at most 8 files in all, what the device tool brings back)
#   MINUTES  the whole script's limit, start-up included (default 9.5: one 10-minute device call)
#   EARLIER  an earlier run's campaign folder (or the shipped records): its measurements.jsonl is imported first,
#            so that this run measures only what is missing (default: none)
#
# A run cut off at any point leaves in OUT everything measured so far (the campaign rewrites its files
# atomically as it goes); run the script again with the same OUT, or with EARLIER, to continue.
# Wheels in .whl/ (a device machine without network) are installed into /tmp/site first; elsewhere attn-cost
# must be installed. GPU_FIRST_DEVICE=cpu rehearses the same steps on the CPU at small sizes (--quick).
set -uo pipefail
out=$(realpath -m "${1:?usage: benchmarks/gpu_first.sh OUT [MINUTES] [EARLIER]}")
total=${2:-9.5}
earlier=${3:+$(realpath -m "$3")}
start=$(date +%s)
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
export ATTN_COST_HOME=${ATTN_COST_HOME:-/tmp/attn-cost-home}
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "gpu_first: the wheels in .whl did not install" >&2; exit 2; }
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
ac() { python3 -P -m attn_cost "$@"; }  # -P: the installed attn_cost, not the source tree's bare attn_cost/
if [ "${GPU_FIRST_DEVICE:-gpu}" = cpu ]; then device=(--cpu); quick=(--quick); else device=(--gpu); quick=(); fi
mkdir -p "$out/campaign" || exit 2
if [ -n "$earlier" ] && [ ! -e "$out/campaign/measurements.jsonl" ]; then
  [ -f "$earlier/measurements.jsonl" ] || { echo "gpu_first: no measurements.jsonl in $earlier" >&2; exit 2; }
  cp "$earlier/measurements.jsonl" "$out/campaign/measurements.jsonl"
fi
echo "+ attn-cost doctor ${device[*]} --json --no-profile  (the campaign measures what the mini profile would)"
ac doctor "${device[@]}" --json --no-profile >"$out/doctor.json.tmp"
status=$?
mv "$out/doctor.json.tmp" "$out/doctor.json"
if [ "$status" = 2 ]; then
  echo "gpu_first: doctor refused this machine (exit 2); nothing measured" >&2
  exit 2
fi
python3 - "$out/doctor.json" <<'EOF' || true
import json, sys
d = json.load(open(sys.argv[1]))
dev = d.get("device", {})
print("doctor:", dev.get("name"), "| torch", d.get("versions", {}).get("torch"), "|", "; ".join(d.get("missing", [])) or "nothing missing")
EOF
left=$(python3 -c "print(round(max(0.5, $total - ($(date +%s) - $start) / 60), 2))")
echo "+ attn-cost campaign ${device[*]} ${quick[*]} --out $out/campaign --minutes $left"
ac campaign "${device[@]}" "${quick[@]}" --out "$out/campaign" --minutes "$left"
status=$?
echo "gpu_first: done in $(( $(date +%s) - start )) s (campaign exit $status); files:"
ls -l "$out" "$out/campaign"
exit "$status"
