#!/bin/bash
out=/work/ab-rot11/out4; mkdir -p $out
for who in base new; do
  dir=/work/base11; [ $who = new ] && dir=/work/ab-rot11/new
  flock /tmp/warden-bench.lock $dir/benchload --warden $dir/warden --out $out --name "s8-$who" \
    --shards 8 --ref-shards 8 --clients 1024 --only uncontended --open-rate -1 --duration 75s \
    --repeat 1 --profile=false --port 29000 > $out/s8-$who.log 2>&1
  echo "$(date +%T) $who done"
done
