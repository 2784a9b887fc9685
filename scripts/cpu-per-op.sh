#!/bin/bash
# usage: scripts/cpu-per-op.sh BIN SHARDS TAG [clients] [duration]
# (env PROF=0: no CPU profiles; OUT: where profiles go, default /tmp)
# Starts 3 nodes (warden bench node, with pprof) on 127.0.0.1, runs uncontended
# load and prints server CPU-µs, read/write syscalls and voluntary context
# switches per lock op (from /proc), plus operations per Raft entry (status).
# Used for docs/performance.md, second round, on a shared machine.
BIN=$1; SH=$2; TAG=$3; CL=${4:-256}; DUR=${5:-8s}
BASE=${BASE:-29000}
OUT=${OUT:-/tmp}
D=$(mktemp -d /tmp/cpu-per-op-XXXX)
MEM="1=127.0.0.1:$((BASE+100)),2=127.0.0.1:$((BASE+101)),3=127.0.0.1:$((BASE+102))"
PIDS=()
for i in 1 2 3; do
  setsid $BIN bench node --id $i --data-dir $D/n$i --listen 127.0.0.1:$((BASE+i-1)) --raft 127.0.0.1:$((BASE+99+i)) \
    --members $MEM --shards $SH --plaintext --pprof 127.0.0.1:$((BASE+199+i)) >$D/n$i.log 2>&1 &
  PIDS+=($!)
done
echo "pids ${PIDS[*]}" >&2
sleep 6
EPS=127.0.0.1:$BASE,127.0.0.1:$((BASE+1)),127.0.0.1:$((BASE+2))
# warm probe: short bench run
for t in 1 2 3 4 5 6; do
  $BIN bench --endpoints $EPS --scenario uncontended --clients 16 --duration 2s --warmup 1s --no-progress -o json >/dev/null 2>$D/warm.err && break
  sleep 3
done
if [ "${PROF:-1}" = 1 ]; then
  for i in 1 2 3; do curl -s -o $OUT/$TAG-s$SH-n$i.pprof "http://127.0.0.1:$((BASE+199+i))/debug/pprof/profile?seconds=5" & CURLS+=($!); done
fi
PL=$(IFS=,; echo "${PIDS[*]}")
sc() { local r=0 w=0 cs=0; for p in ${PIDS[*]}; do r=$((r+$(awk '/^syscr/{print $2}' /proc/$p/io))); w=$((w+$(awk '/^syscw/{print $2}' /proc/$p/io))); for t in /proc/$p/task/*/status; do cs=$((cs+$(awk '/^voluntary_ctxt/{print $2}' $t 2>/dev/null || echo 0))); done; done; echo "$r $w $cs"; }
SC0=($(sc)); T0=$(date +%s.%N)
$BIN bench --endpoints $EPS --scenario uncontended --clients $CL --duration $DUR --warmup 2s --no-progress --pids $PL --json $D/res.json -o table >$D/out.txt 2>&1
SC1=($(sc)); T1=$(date +%s.%N)
for c in ${CURLS[*]}; do wait $c; done
echo "SYSC $((SC1[0]-SC0[0])) $((SC1[1]-SC0[1])) $((SC1[2]-SC0[2])) $T0 $T1" > $D/sysc.txt
python3 - "$D/res.json" "$TAG" "$SH" "$CL" "$D/sysc.txt" <<'PY'
import json,sys
j=json.load(open(sys.argv[1]))
rs=j.get('results') or j.get('Results') or j
r=rs[0] if isinstance(rs,list) else rs
m=r['metrics']
ops=m['lock_ops_per_s']; cores=m['server_cpu_cores']
acq=r['ops'].get('acquire',{})
sc=open(sys.argv[5]).read().split()
rd,wr,cs,t0,t1=int(sc[1]),int(sc[2]),int(sc[3]),float(sc[4]),float(sc[5])
# ops over the whole window (warmup+run) approximated by the measured rate
nops=ops*(t1-t0)
extra=f" reads/op={rd/nops:.2f} writes/op={wr/nops:.2f} vcsw/op={cs/nops:.2f}"
print(f"{sys.argv[2]} shards={sys.argv[3]} clients={sys.argv[4]} ops/s={ops:.0f} server_cores={cores:.3f} cpu_us/op={cores/ops*1e6:.1f} loadgen={m.get('loadgen_cpu_cores')} load1={m.get('loadavg_1m')} acq_p50={acq.get('p50_ms')} p99={acq.get('p99_ms')} errs={r.get('errors')}"+extra)
PY
for i in 0 1 2; do timeout 20 $BIN status --endpoints 127.0.0.1:$((BASE+i)) -o json > $D/status$i.json 2>/dev/null; done
python3 -c "
import sys,json
e=o=0
for i in range(3):
  try: j=json.load(open('$D/status%d.json'%i))
  except Exception as ex: print('status parse', ex); continue
  for s in j.get('shards') or []:
    e+=s.get('proposals',0); o+=s.get('proposed_ops',0)
print('status ops/entry', round(o/max(e,1),2), 'entries', e)"
for p in ${PIDS[*]}; do kill -TERM -$p 2>/dev/null; done
sleep 2
for p in ${PIDS[*]}; do kill -KILL -$p 2>/dev/null; done
rm -rf $D
