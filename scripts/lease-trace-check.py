#!/usr/bin/env python3
"""Check node logs written with WARDEN_LEASE_TRACE=1 for broken lease promises.

usage: scripts/lease-trace-check.py DIR...   (each DIR holds node*.log, e.g. a
chaos work directory kept with WARDEN_CHAOS_KEEP=1)

For every expiry a lessor decided ("lease trace: due") and the state machine
applied ("expire outcome" ok on that node: a deposed leader's late decision is
refused by term and does not count), it looks at every
keepalive sub-request that the lease's shard answered OK without listing the
lease as gone ("lease trace: keepalive sub-answer", on any node's router) and
reports EARLY when the decision came less than the lease's TTL after that
sub-request was first sent (the router's send: later than the client's, so a
hit here breaks the lease promise of docs/guarantees.md). It also lists keepalives answered for a lease
the state machine called alive but the lessor did not track ("refresh of an
untracked lease", state 1 or 3). Prints the smallest margin seen per
directory; exits 1 if anything was reported.
"""
import datetime
import glob
import re
import sys

KV = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


def ts(s):
    if len(s) == 15 and s[2] == ':':  # trace times: 15:04:05.000000 (UTC)
        h, m, x = s.split(':')
        return int(h) * 3600 + int(m) * 60 + float(x)
    s = s.rstrip('Z')
    a, _, b = s.partition('.')
    return datetime.datetime.strptime(a + '.' + (b + '000000')[:6], '%Y-%m-%dT%H:%M:%S.%f').timestamp()


def dur(t):
    unit = {'h': 3600, 'm': 60, 's': 1, 'ms': 1e-3, 'µs': 1e-6, 'us': 1e-6, 'ns': 1e-9}
    return sum(float(n) * unit[u] for n, u in re.findall(r'([\d.]+)(ms|µs|us|ns|h|m|s)', t))


def ids(s):
    return [int(x) for x in s.strip('[]').split()] if s else []


def parse(line):
    d = {}
    for k, v in KV.findall(line):
        d.setdefault(k, v.strip('"'))  # the first msg= is the log message
    return d


def check(d):
    subs, dues, ttls, found, applied = [], [], {}, [], set()
    for f in sorted(glob.glob(d + '/node*.log')):
        for line in open(f, errors='replace'):
            if 'lease trace' not in line:
                continue
            p = parse(line)
            m = p.get('msg', '')
            if m == 'lease trace: keepalive sub-answer':
                subs.append((int(p['shard']), set(ids(p['leases'])), ts(p['sent']), p['code'],
                             set(ids(p.get('gone', ''))), p['node']))
            elif m == 'lease trace: due':
                dues.append((p['node'], int(p['shard']), int(p['lease']), ts(p['now'])))
            elif m == 'lease trace: expire outcome' and p.get('code') == 'ok':
                applied.add((p['node'], int(p['shard']), int(p['lease'])))
            elif m == 'lease trace: track':
                ttls[int(p['lease'])] = dur(p['ttl'])
            elif m == 'lease trace: refresh of an untracked lease' and p.get('state') in ('1', '3'):
                found.append('UNTRACKED: ' + line.strip())
    worst = None
    dues = [x for x in dues if x[:3] in applied]
    for node, shard, lease, now in dues:
        ttl = ttls.get(lease, 2.0)
        for sshard, leases, sent, code, gone, snode in subs:
            if sshard != shard or lease not in leases or code != 'ok' or lease in gone or sent > now:
                continue
            margin = now - (sent + ttl)
            if worst is None or margin < worst[0]:
                worst = (round(margin, 6), lease, shard)
            if margin < 0:
                found.append('EARLY: lease %d (shard %d) due on node %s %.3f s before TTL after a keepalive '
                             'that node %s\'s router sent and the shard answered OK' % (lease, shard, node, -margin, snode))
    print('%s: %d expiries, %d sub-answers, smallest margin (s, lease, shard) %s' % (d, len(dues), len(subs), worst))
    for f in found:
        print('  ' + f)
    return not found


if __name__ == '__main__':
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    ok = all([check(d) for d in sys.argv[1:]])
    sys.exit(0 if ok else 1)
