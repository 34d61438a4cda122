#!/usr/bin/env bash
# same warm machine after cx and cq: pre-normed graph (FLA, FlashInfer), eager engine style, FlashQLA pre-normed
END=${END:-330}; source calls/common.sh
[ -f /tmp/peers_ok ] || { echo "no FlashInfer: the machine went cold"; exit 3; }
b p $(( $(left) * 45 / 100 )) --impls gdn:wgmma,fla,flashinfer --heads 16/32,8/16,16/64,4/16 --modes graph --shapes 8x4K,16x512,1x32K
b g $(( $(left) * 45 / 100 )) --impls gdn:wgmma,flashinfer --heads 16/32,8/16,4/16 --modes eager --qk-l2norm --pool --shapes 8x4K,16x512,$M16,1x32K
lim=$(( $(left) - 25 ))
PYTHONPATH=$PWD:/tmp/qlasite:/tmp/site timeout -s KILL $((lim + 15)) python3 benchmarks/bench_prefill.py $P --budget-s $lim \
  --impls gdn:wgmma,flashqla --modes graph --heads 16/32,8/16,4/16 --shapes 1x32K,1x64K,8x4K --out /tmp/r/qp --tag qp > /tmp/r/qp.log 2>&1
echo "qp rc=$?"; python3 calls/table.py /tmp/r/qp/qp.json | tail -n +3 | sed "s/^/qp /"
pack cy; echo "done at $((SECONDS-T0)) s"
