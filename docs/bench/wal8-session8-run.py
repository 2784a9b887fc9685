#!/usr/bin/env python3
"""Run one benchload of BIN, sampling its 3 nodes: write_bytes, CPU, WAL
segment files; perf stat fdatasync counts per second. Prints a JSON line."""
import json, os, subprocess, sys, time, glob, datetime

binpath, name, dur = sys.argv[1], sys.argv[2], sys.argv[3]
skip = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
out = '/tmp/wal8/out'
tck = os.sysconf('SC_CLK_TCK')
bl = subprocess.Popen(['/tmp/bins/benchload', '--warden', binpath, '--out', out, '--name', name,
    '--shards', '1', '--ref-shards', '1', '--clients', '256', '--only', 'uncontended c=256',
    '--duration', dur, '--repeat', '1', '--profile=false', '--port', '33000'],
    stdout=open(f'/tmp/wal8/{name}.log', 'w'), stderr=subprocess.STDOUT)

def nodes():
    res = {}
    for p in os.listdir('/proc'):
        if not p.isdigit(): continue
        try:
            a = open(f'/proc/{p}/cmdline', 'rb').read().split(b'\0')
        except OSError: continue
        if a and a[0].decode() == binpath and b'--data-dir' in a:
            res[int(p)] = a[a.index(b'--data-dir') + 1].decode()
    return res

ns = {}
while bl.poll() is None and len(ns) < 3:
    ns = nodes(); time.sleep(0.1)
perf_t0 = time.time()
perf = subprocess.Popen(['perf', 'stat', '-I', '1000', '-x', ',', '-e', 'syscalls:sys_enter_fdatasync',
    '-p', ','.join(map(str, ns)), '-o', f'/tmp/wal8/{name}.perf'])
samples = []
while bl.poll() is None:
    s = {'t': time.time(), 'n': {}}
    for pid, dd in ns.items():
        try:
            io = dict(l.split(': ') for l in open(f'/proc/{pid}/io').read().split('\n') if l)
            st = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
            cpu = (int(st[11]) + int(st[12])) / tck
            wal = glob.glob(f'{dd}/**/wardenwal', recursive=True)
            files = sorted(os.listdir(wal[0])) if wal else []
            s['n'][pid] = {'wb': int(io['write_bytes']), 'wc': int(io['wchar']), 'cpu': cpu, 'files': files}
        except (OSError, IndexError, ValueError):
            pass
    samples.append(s)
    time.sleep(0.25)
perf.terminate(); perf.wait()
d = json.load(open(f'{out}/{name}.json'))
o = [o for o in d['outcomes'] if o['label'] == 'shards=1 uncontended c=256'][0]
m = o['median']
def ts(x):
    return datetime.datetime.fromisoformat(x[:26].rstrip('Z') + '+00:00').timestamp()
t0 = ts(m['measured']); t1 = t0 + m['elapsed_s']
ops = o['values'][0] * m['elapsed_s']
json.dump({'samples': samples, 'perf_t0': perf_t0, 't0': t0, 't1': t1, 'series': m['series']}, open(f'/tmp/wal8/{name}.samples.json', 'w'))
if skip:
    ops = 2 * sum(x['ops'] for x in m['series'] if x['t'] > skip)
    t0 = t0 + skip
def at(t, pid, key):
    pts = [(s['t'], s['n'][pid][key]) for s in samples if pid in s['n']]
    for (ta, va), (tb, vb) in zip(pts, pts[1:]):
        if ta <= t <= tb:
            return va + (vb - va) * (t - ta) / (tb - ta)
    return None
def segs_between(pid):
    seen, recyc, filled = set(), 0, 0
    for s in samples:
        if t0 <= s['t'] <= t1 and pid in s['n']:
            for f in s['n'][pid]['files']:
                seen.add(f)
    return sorted(f for f in seen if f.endswith('.wal')), sorted(f for f in seen if f.startswith('spare'))
# perf intervals: "time,count,,event,..."
fds = 0.0
for line in open(f'/tmp/wal8/{name}.perf'):
    if line.startswith('#') or not line.strip(): continue
    p = line.split(',')
    try:
        t, c = float(p[0]), float(p[1])
    except ValueError: continue
    tend = perf_t0 + t; tstart = tend - 1.0
    ov = max(0.0, min(tend, t1) - max(tstart, t0))
    fds += c * ov
res = {'name': name, 'window_s': t1 - t0, 'bin': binpath, 'lockops': o['values'][0], 'ops': ops,
       'server_cores': m['metrics'].get('server_cpu_cores'), 'loadavg': m['metrics'].get('loadavg_1m'),
       'fdatasync_per_op_all_nodes': fds / ops, 'nodes': {}}
for pid in ns:
    wb0, wb1 = at(t0, pid, 'wb'), at(t1, pid, 'wb')
    c0, c1 = at(t0, pid, 'cpu'), at(t1, pid, 'cpu')
    segs, spares = segs_between(pid)
    wc0, wc1 = at(t0, pid, 'wc'), at(t1, pid, 'wc')
    res['nodes'][pid] = {'write_bytes_per_op': (wb1 - wb0) / ops if wb0 is not None and wb1 is not None else None,
        'wchar_per_op': (wc1 - wc0) / ops if wc0 is not None and wc1 is not None else None,
        'cpu_us_per_op': (c1 - c0) / ops * 1e6 if c0 is not None and c1 is not None else None,
        'segments_seen': [int(x[:-4]) for x in segs], 'spares_seen': spares}
print(json.dumps(res))
