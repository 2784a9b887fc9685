#!/usr/bin/env python3
# usage: fcmp.py A.fold B.fold MODE [focus-regex] [rows]; MODE root, rootN (N frames), leaf, cum, child
import sys,collections,re
def load(f):
    return [(l.rsplit('\t',1)[0].split(';'),float(l.rsplit('\t',1)[1])) for l in open(f) if l.strip()]
A,B,mode=load(sys.argv[1]),load(sys.argv[2]),sys.argv[3]
focus=sys.argv[4] if len(sys.argv)>4 else None
skip=('runtime.goexit','goutils','newExecEngine','[unknown]')
def short(s): return re.sub(r'github.com/(lni/dragonboat/v4|wardenlock/warden)/?','',s)[:70]
def keys(fr):
    if focus:
        idx=[i for i,f in enumerate(fr) if re.search(focus,f)]
        if not idx: return []
        fr=fr[idx[0]:]
    if mode.startswith('root'):
        n=int(mode[4:] or 1)
        u=[f for f in fr if not any(s in f for s in skip)]
        return [' < '.join(short(x) for x in u[:n])]
    if mode=='leaf': return [short(fr[-1])]
    if mode=='kernel':
        k=[f for f in fr if not ('.' in f or '/' in f)]
        return ['kernel' if fr[-1] and not ('.' in fr[-1]) else 'user']
    if mode=='cum': return list({short(f) for f in fr})
    if mode.startswith('child'):
        return [short(fr[1]) if len(fr)>1 else '(self)']
def agg(S):
    d=collections.Counter()
    for fr,v in S:
        for k in keys(fr): d[k]+=v
    return d
a,b=agg(A),agg(B)
n=int(sys.argv[5]) if len(sys.argv)>5 else 40
for k in sorted(set(a)|set(b),key=lambda k:-(b[k]-a[k]))[:n]:
    if max(a[k],b[k])<0.05: continue
    print(f'{k[:110]:110s} {a[k]:6.2f} {b[k]:6.2f} {b[k]-a[k]:+6.2f}')
print('total', round(sum(v for _,v in A),2), round(sum(v for _,v in B),2))
