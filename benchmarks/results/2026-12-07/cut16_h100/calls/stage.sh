#!/usr/bin/env bash
# stage a peer part, and report the card
bash .peer$1/stage.sh && nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
