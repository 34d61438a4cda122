# stage a peer part, and report the card
bash .peer$1/stage.sh && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
