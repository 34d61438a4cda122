source lab/s54/common.sh; [ -f /tmp/peers_ok ] || exit 3; b qm 110 --impls gdn:wgmma,flashinfer --heads 16/16,4/8,16/64 --modes graph --qk-l2norm --pool --shapes 1x32K --gates mixed; pack c7
