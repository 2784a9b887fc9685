#!/bin/bash
# alternated A/B: base and merged, 3 rounds, uncontended 1,16 shards and contended
out=/tmp/x/ab9; mkdir -p $out
i=0
for order in "base merged" "merged base" "base merged"; do
  i=$((i+1))
  for who in $order; do
    bin=/tmp/prof-557cfae/warden; [ $who = merged ] && bin=/tmp/x/warden-merged
    /tmp/x/benchload --warden $bin --out $out --name un-$who-$i --shards 1,16 --ref-shards 1 --clients 256 --only uncontended --open-rate -1 --duration 5s --repeat 1 --profile=false --port 27000 > $out/un-$who-$i.log 2>&1
    /tmp/x/benchload --warden $bin --out $out --name co-$who-$i --shards 1 --ref-shards 1 --only contended --duration 5s --repeat 1 --profile=false --port 27000 > $out/co-$who-$i.log 2>&1
    echo "$(date +%T) $who $i done"
  done
done
