#!/bin/bash
# Alternated A/B of session 10: the base tree (cfbd2f6: its warden AND its
# load generator) against the merged tree (its warden and its load
# generator), 3 rounds, a fresh cluster per run; uncontended at 1 and 16
# shards (256 clients) and contended (32 clients on one lock, 1 shard).
# Usage: ab.sh BASE_DIR MERGED_DIR OUT   (each DIR holds warden and benchload)
set -u
base=$1; merged=$2; out=$3; mkdir -p "$out"
i=0
for order in "base merged" "merged base" "base merged"; do
  i=$((i+1))
  for who in $order; do
    dir=$base; [ "$who" = merged ] && dir=$merged
    flock /tmp/warden-bench.lock "$dir/benchload" --warden "$dir/warden" --out "$out" --name "un-$who-$i" \
      --shards 1,16 --ref-shards 1 --clients 256 --only uncontended --open-rate -1 --duration 5s \
      --repeat 1 --profile=false --port 29000 > "$out/un-$who-$i.log" 2>&1
    flock /tmp/warden-bench.lock "$dir/benchload" --warden "$dir/warden" --out "$out" --name "co-$who-$i" \
      --shards 1 --ref-shards 1 --only contended --duration 5s --repeat 1 --profile=false \
      --port 29000 > "$out/co-$who-$i.log" 2>&1
    echo "$(date +%T) $who $i done"
  done
done
