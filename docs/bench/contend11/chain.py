import sys, glob, struct, bisect, statistics
d = sys.argv[1]
files = {}
for f in glob.glob(d + '/ev-*'):
    b = open(f, 'rb').read()
    n = len(b)//8
    vals = struct.unpack('<%dQ' % n, b[:n*8])
    ev = {}
    for v in vals:
        ev.setdefault(v & 255, []).append((v >> 8) / 10.0)  # µs
    for k in ev: ev[k].sort()
    files[f] = ev
leader = [max(files, key=lambda f: len(files[f].get(1, [])))]
client = [f for f in files if 21 in files[f]]
fols = [f for f in files if f not in leader and f not in client]
assert len(leader) == 1 and len(client) == 1, (leader, client)
L, C = files[leader[0]], files[client[0]]
Fs = [files[f] for f in fols]
def first(ev, k, t):
    a = ev.get(k, [])
    i = bisect.bisect_right(a, t)
    return a[i] if i < len(a) else None
rel = L[1]
# measured window: middle of the run
lo, hi = rel[0] + (rel[-1]-rel[0])*0.2, rel[0] + (rel[-1]-rel[0])*0.9
steps = {}
def add(name, v):
    steps.setdefault(name, []).append(v)
order = []
for i in range(len(rel)-1):
    t1 = rel[i]
    if not (lo <= t1 <= hi): continue
    nxt = rel[i+1]
    p = first(L, 2, t1);
    if p is None or p > nxt: continue
    s3 = first(L, 3, t1)
    s6 = first(L, 6, p); s7 = first(L, 7, s6) if s6 else None
    a5 = first(L, 5, s3) if s3 else None
    u8 = first(L, 8, p)
    h9 = first(L, 9, u8) if u8 else None
    w10 = first(L, 10, h9) if h9 else None
    c20 = first(C, 20, w10) if w10 else None
    c21 = first(C, 21, c20) if c20 else None
    c22 = first(C, 22, c21) if c21 else None
    if None in (s3, s6, s7, a5, u8, h9, w10, c20, c21, c22): continue
    if c22 > nxt: continue
    chain = [('release decoded -> Propose', p - t1), ('Propose -> Replicate to transport', s3 - p),
             ('Replicate -> first ack read (follower part)', a5 - s3),
             ('first ack -> leader Update starts', u8 - a5),
             ('Update -> hand-off Applied', h9 - u8), ('Applied -> router grant write returned', w10 - h9),
             ('grant written -> client reader decoded', c20 - w10), ('client decoded -> Unlock called', c21 - c20),
             ('Unlock -> client write returned', c22 - c21), ('client write -> router decoded release', nxt - c22)]
    for n, v in chain: add(n, v); 
    if not order: order = [n for n, _ in chain]
    add('TOTAL release->next release', nxt - t1)
    add('side: leader save start - Propose', s6 - p)
    add('side: leader save dur', s7 - s6)
    w4 = first(L, 4, s3)
    if w4: add('side: leader Replicate write returned - send', w4 - s3)
    add('side: leader save end - first ack', s7 - a5)
    for j, F in enumerate(Fs):
        r = first(F, 30, s3); 
        if r is None or r > a5 + 5000: continue
        fs6 = first(F, 6, r); fs7 = first(F, 7, fs6) if fs6 else None; f31 = first(F, 31, fs7) if fs7 else None
        if None in (fs6, fs7, f31): continue
        add('side: F%d recv replicate - leader send' % j, r - s3)
        add('side: F%d recv->save start' % j, fs6 - r)
        add('side: F%d save dur' % j, fs7 - fs6)
        add('side: F%d save end->resp send' % j, f31 - fs7)
n = len(steps['TOTAL release->next release'])
print('chains', n)
print('%-50s %8s %8s %8s' % ('step', 'p50', 'mean', 'p90'))
for k in order + ['TOTAL release->next release'] + sorted(k for k in steps if k.startswith('side')):
    v = sorted(steps[k])
    print('%-50s %8.0f %8.0f %8.0f' % (k, v[len(v)//2], statistics.mean(v), v[len(v)*9//10]))
