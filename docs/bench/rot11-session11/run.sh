#!/bin/bash
# 8 shards, 1,024 clients, 20 s: the rotation stall of session 10.
out=/work/ab-rot11/${OUT:-out}; mkdir -p $out
i=0
for order in "base new" "new base"; do
  i=$((i+1))
  for who in $order; do
    dir=/work/base11; [ $who = new ] && dir=/work/ab-rot11/new
    flock /tmp/warden-bench.lock $dir/benchload --warden $dir/warden --out $out --name "s8-$who-$i" \
      --shards 8 --ref-shards 8 --clients 1024 --only uncontended --open-rate -1 --duration ${DUR:-20s} \
      --repeat 1 --profile=false --port 29000 > $out/s8-$who-$i.log 2>&1
    echo "$(date +%T) $who $i done"
  done
done
