#!/usr/bin/env bash
# One call, no peers (carry .gpu .whl): the cut at e^-16 (main) on a GPU for the first time: the
# segmented GPU tests, the sanitizer and numerics_hard, a soak of the segmented plan; 16/48's rule
# against the same plan forced in turn; each pass alone at 4/16 by gates; -16 against -10 (A B A).
source lab/s54/common.sh
ov() { rm -rf /tmp/ov; cp -r .gpu/aot /tmp/ov; cp -r .gpu/$1/. /tmp/ov/; rm -f gdn_prefill/_ext*.so
       GDN_PREFILL_PREBUILT=/tmp/ov python3 setup.py build_ext --inplace > /tmp/build_$1.log 2>&1; echo "$1 build rc=$? at $((SECONDS-T0)) s"; }
ov cut16
timeout -s KILL 100 python3 -m pytest -q -n 8 -p xdist tests/test_gpu_prefill.py -k "seg or cut" > /tmp/r/tests_seg.log 2>&1
echo "seg tests rc=$? at $((SECONDS-T0)) s: $(tail -1 /tmp/r/tests_seg.log)"; grep -E "^FAILED|^ERROR" /tmp/r/tests_seg.log | head
timeout -s KILL 150 python3 -m pytest -q -n 8 -p xdist tests/test_gpu_sanitizer.py tests/test_numerics_hard.py > /tmp/r/tests_san.log 2>&1
echo "sanitizer+hard rc=$? at $((SECONDS-T0)) s: $(tail -1 /tmp/r/tests_san.log)"; grep -E "^FAILED|^ERROR" /tmp/r/tests_san.log | head
cp /tmp/r/tests_*.log $OUT/
timeout -s KILL 80 python3 benchmarks/soak_streams.py --impls gdn --shape 1x32768 --heads 4/16 --runs 2 --iters 25 \
  --md $OUT/soak.md > $OUT/soak.log 2>&1; echo "soak rc=$? at $((SECONDS-T0)) s"; grep -E "^\|" $OUT/soak.md | tail -4
timeout -s KILL 45 python3 lab/next57/order.py 16 48 32768 2>&1 | tail -8 | tee $OUT/order.log
for G in fast mixed slow; do   # each launch alone at the planner's 4 segments: where each gate draw's time goes
  timeout -s KILL 40 python3 benchmarks/bench_segments.py --shapes 1x32K --heads 4/16 --segments 4,8 \
    --gates $G --json $OUT/pass_4_16_$G.json > $OUT/pass_4_16_$G.log 2>&1; echo "passes 4/16 $G rc=$? at $((SECONDS-T0)) s"
  grep "sc=" $OUT/pass_4_16_$G.log
done
S="--impls gdn:wgmma --heads 4/16,8/16,2/8,4/8 --modes graph --qk-l2norm --pool --shapes 1x32K,1x64K,1x8K"
b t16 $(( $(left) * 30 / 100 )) $S
ov cut10; b t10 $(( $(left) * 50 / 100 )) $S
ov cut16; b t16b $(( $(left) - 15 )) $S
pack c3n; echo "done at $((SECONDS-T0)) s"
