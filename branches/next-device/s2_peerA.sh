#!/usr/bin/env bash
# Call 2 (~30 s), at once after call 1 while the machine is warm: part A of the FlashInfer bundle.
#   bash lab/next/s2_peerA.sh        Carry: .peerA   (61 MiB: nothing else fits beside it)
[ -f /tmp/peersite/.partB ] || echo "warning: part B is not staged (the machine was not warm): run call 1's peers step again"
bash .peerA/install.sh 2>&1 | tail -3
ls build/ 2>/dev/null | tr '\n' ' '; echo; cat /tmp/gdn_verdict 2>/dev/null && echo " (verdict of call 1)"
