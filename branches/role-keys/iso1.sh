#!/usr/bin/env bash
# Session 42 (no device then), call 1 of 3.  Run with branch deep-rings-rk2 (deep-rings-rk on main) checked out (it has the
# isolation test, tools/bitwise_outputs.py --runs single and the plan golden of the 4-slot rings).
#   f16b = main's objects (build/carry10); build/carry13: iso = main + A's rows past L selected
#   (branch isolation), rc = split-keys + the key check in the role (branch role-keys), dk =
#   deep-rings-phys + the key check in the role (branch deep-rings-rk), ek = rc + with l2norm the
#   keys' rk from the role's K K^T diagonal, the norm warps summing only q (branch engine-keys);
#   de = dk + ek (branch deep-rings-ek); rc, dk, ek and de include iso.
# 1. Is the isolation bug real?  Predicted: on main's objects the single plan fails
#    test_a_sequence_is_isolated_from_its_neighbours_values (NaN / inf in sequence 1 poisons
#    sequence 0's output and state); the two-launch plans (stage 1 zeroes rows past L) pass.
# 2. iso, rc, dk pass it; iso's and rc's outputs are main's bit for bit (rows past L aside, no value
#    changes), dk's and ek's too pre-normed (with l2norm: dk's sums run in another order, ek's
#    rk comes from the MMA's diagonal: last bits).
source lab/device_lib.sh
[ -d build/slim_f16b ] || tar xJf build/carry10/f16b.tar.xz -C build
for b in iso rc dk ek de; do [ -d build/slim_$b ] || tar xJf build/carry13/$b.tar.xz -C build; done
ISO="tests/test_gpu_prefill.py -m gpu -q -p no:cacheprovider -rfE"
show() { grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/$1.log" | tail -"${2:-8}"; }
inst build/slim_f16b f16b
step iso_f16b 150 python3 -m pytest $ISO -k isolated; show iso_f16b 16
step bw_f16b 90 python3 tools/bitwise_outputs.py --runs single,prefill --save /tmp/bw_f16b.pt; tail -1 "$OUT/bw_f16b.log"
for b in iso rc ek dk de; do
  inst build/slim_$b $b
  [ $b = dk ] && { timeout -s KILL 60 python3 benchmarks/bench_fused.py --smoke >"$OUT/smoke_dk.log" 2>&1; echo "dk smoke: rc=$?"; }
  step iso_$b 90 python3 -m pytest $ISO -k "isolated and single"; show iso_$b 6
  step bw_$b 90 python3 tools/bitwise_outputs.py --runs single,prefill --save /tmp/bw_$b.pt; tail -1 "$OUT/bw_$b.log"
  python3 tools/bitwise_outputs.py --compare /tmp/bw_f16b.pt /tmp/bw_$b.pt > "$OUT/cmp_$b.txt" 2>&1
  echo "cmp $b: rc=$? $(grep -c -i differ "$OUT/cmp_$b.txt") lines with 'differ'"
done
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
