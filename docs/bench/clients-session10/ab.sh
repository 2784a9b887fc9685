#!/bin/bash
for i in 1 2 3; do
 for who in base merged; do
  d=/tmp/base10; [ $who = merged ] && d=/tmp/m10
  $d/benchload --warden $d/warden --out /tmp/cl10 --name c-$who-$i --shards 1 --ref-shards 1 --clients 512,1024 --only uncontended --open-rate -1 --duration 5s --repeat 1 --profile=false --port 29000 2>&1 | grep "run 1/1" | sed "s/^/$who $i /"
 done
done
