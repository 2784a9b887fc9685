#!/usr/bin/env python3
# usage: fold.py PERFDATA OPS_IN_WINDOW > folded (frames root..leaf ; weight µs/op)
import subprocess,sys,collections
data,ops,COMM=sys.argv[1],float(sys.argv[2]),sys.argv[3]
p=subprocess.Popen(['perf','script','-i',data,'-F','comm,period,ip,sym'],stdout=subprocess.PIPE,text=True,stderr=subprocess.DEVNULL)
d=collections.Counter(); cur=None; frames=[]
def flush():
    if cur is not None and cur == COMM:
        d[';'.join(reversed(frames))]+=1
for line in p.stdout:
    if not line.strip():
        flush(); cur=None; frames=[]; continue
    if not line.startswith((' ','\t')):
        cur=line.split()[0]; frames=[]; continue
    parts=line.strip().split(None,1)
    sym=parts[1] if len(parts)>1 else '?'
    sym=sym.rsplit(' (',1)[0]
    frames.append(sym)
flush()
# each sample = 1/1999 s of CPU
us=1e6/1999
for k,v in d.items(): print(f'{k}\t{v*us/ops:.5f}')
