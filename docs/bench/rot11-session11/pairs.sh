#!/bin/bash
# pairs.sh NEWDIR TAG N [benchload args...]: N alternated pairs, base11 vs NEWDIR (warden only differs), under the bench lock.
new=$1; tag=$2; n=$3; shift 3
out=/work/ab-lead/out/$tag; mkdir -p $out
for i in $(seq 1 $n); do
  if [ $((i%2)) = 1 ]; then order="base new"; else order="new base"; fi
  for who in $order; do
    d=/work/base11; [ $who = new ] && d=$new
    flock /tmp/warden-bench.lock /work/base11/benchload --warden $d/warden --out $out --name $who-$i \
      --open-rate -1 --repeat 1 --profile=false --port 29000 "$@" 2>&1 | grep "lock ops/s" | sed "s/^/$who-$i /"
  done
done
