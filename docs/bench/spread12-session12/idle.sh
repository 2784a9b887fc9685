#!/bin/bash
# usage: idle.sh BIN SHARDS PORT [extra args]: 3 nodes, no quotas, no load; CPU seconds per node over 10 s after 15 s
BIN=$1; SH=$2; BASE=$3; shift 3
D=$(mktemp -d /tmp/spread12/idle-XXXX)
MEM="1=127.0.0.1:$((BASE+100)),2=127.0.0.1:$((BASE+101)),3=127.0.0.1:$((BASE+102))"
PIDS=()
for i in 1 2 3; do
  setsid $BIN serve --id $i --data-dir $D/n$i --listen 127.0.0.1:$((BASE+i-1)) --raft 127.0.0.1:$((BASE+99+i)) \
    --members $MEM --shards $SH --replicas 3 --plaintext --no-leader-balance "$@" >$D/n$i.log 2>&1 &
  PIDS+=($!)
done
sleep 15
cpu() { for p in ${PIDS[*]}; do awk '{print $14+$15}' /proc/$p/stat; done; }
A=($(cpu)); if [ -n "$PERF" ]; then perf record -a -g -F 1999 -o $PERF -- sleep 10 >/dev/null 2>&1; else sleep 10; fi; B=($(cpu))
echo "shards=$SH idle cores per node: $(for i in 0 1 2; do echo -n "$(echo "scale=3; (${B[$i]}-${A[$i]})/1000" | bc) "; done)"
for p in ${PIDS[*]}; do kill -TERM $p; done; sleep 2; for p in ${PIDS[*]}; do kill -KILL $p 2>/dev/null; done
rm -rf $D
