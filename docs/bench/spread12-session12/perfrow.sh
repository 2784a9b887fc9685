#!/bin/bash
# usage: perfrow.sh BIN NODES LEADERS TAG PORT : one row of 25 s, perf record of 10 s from t=15 s
BIN=$1; N=$2; L=$3; TAG=$4; PORT=$5
cd /tmp/spread12
./benchscaling --warden $BIN --out /tmp/spread12/$TAG.md --nodes $N --leaders $L --clients 1024 --duration 25s --cpu 0.25 --port $PORT > $TAG.log 2>&1 &
B=$!
sleep 15
perf record -a -g -F 1999 -o /tmp/spread12/$TAG.perf.data -- sleep 10 >/dev/null 2>&1
wait $B
grep -h "ops/s," $TAG.log
