#!/bin/bash
# One in-process dev cluster (8 shards), 1,024 clients for 40 s, then the
# log store's rotation figures from /v1/status of each node.
bin=$1; name=$2; out=/work/ab-rot11/dev; d=$(mktemp -d /tmp/rotdev.XXXX)
$bin dev --data-dir $d --port 29050 --shards 8 > $out/$name.dev.log 2>&1 &
pid=$!
sleep 8
$bin bench --endpoints 127.0.0.1:29050,127.0.0.1:29051,127.0.0.1:29052 --scenario uncontended --clients 1024 --duration ${DUR:-40s} --no-progress --json $out/$name.json > $out/$name.bench.txt 2>&1
for p in 29250 29251 29252; do curl -s 127.0.0.1:$p/v1/status | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin).get("log_store")))'; done > $out/$name.status.txt
kill $pid; wait $pid; rm -rf $d
