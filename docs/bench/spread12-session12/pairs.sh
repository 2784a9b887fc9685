#!/bin/bash
# usage: pairs.sh TAG N NODES LEADERS PORT BIN_A BIN_B : alternated runs, A first
TAG=$1; N=$2; NODES=$3; L=$4; PORT=$5; A=$6; B=$7
cd /tmp/spread12; mkdir -p pairs
for i in $(seq 1 $N); do
  for x in A B; do
    bin=$A; [ $x = B ] && bin=$B
    out=pairs/$TAG-$i-$x.md
    echo "$(date +%T) load $(cut -d' ' -f1 /proc/loadavg) $TAG pair $i $x" >> pairs/$TAG.log
    flock /tmp/warden-bench.lock ./benchscaling --warden $bin --out $out --nodes $NODES --leaders $L --clients 1024 --duration 10s --cpu 0.25 --port $PORT > pairs/$TAG-$i-$x.log 2>&1
    grep "^| [35] |" $out | awk -F'|' -v t="$TAG $i $x" '{printf "%s n=%s l=%s ops=%s ope=%s hit=%s us/op=%s sys=%s cs=%s\n", t,$2,$3,$4,$6,$9,$10,$14,$15}' | tee -a pairs/$TAG.sum
  done
done
